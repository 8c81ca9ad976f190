// Op functions of the conv family (declared in ops.h): PyTorch-style arguments (Int2 sizes,
// symmetric padding) turned into the ops' ONNX-style per-spatial attributes.
#include "core/frontend/dispatch.h"
#include "core/frontend/ops.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

Ints pair(Int2 v) { return {v.h, v.w}; }
// Symmetric padding in ONNX order: all begins, then all ends.
Ints pads2(Int2 v) { return {v.h, v.w, v.h, v.w}; }

std::vector<Tensor> with_bias(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  std::vector<Tensor> inputs = {x, weight};
  if (bias.defined()) inputs.push_back(bias);  // an absent bias is the op's optional third input
  return inputs;
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups, Loc loc) {
  return run_op1(OpKind::Conv, with_bias(x, weight, bias),
                 {{"stride", Ints{stride}},
                  {"padding", Ints{padding, padding}},
                  {"dilation", Ints{dilation}},
                  {"groups", groups}},
                 loc);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Int2 stride, Int2 padding,
              Int2 dilation, int64_t groups, Loc loc) {
  return run_op1(OpKind::Conv, with_bias(x, weight, bias),
                 {{"stride", pair(stride)},
                  {"padding", pads2(padding)},
                  {"dilation", pair(dilation)},
                  {"groups", groups}},
                 loc);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Int2 stride,
                        Int2 padding, Int2 output_padding, int64_t groups, Int2 dilation, Loc loc) {
  return run_op1(OpKind::ConvTranspose, with_bias(x, weight, bias),
                 {{"stride", pair(stride)},
                  {"padding", pads2(padding)},
                  {"output_padding", pair(output_padding)},
                  {"dilation", pair(dilation)},
                  {"groups", groups}},
                 loc);
}

Tensor max_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride, Int2 padding,
                  Int2 dilation, bool ceil_mode, Loc loc) {
  return run_op1(OpKind::MaxPool, {x},
                 {{"kernel", pair(kernel)},
                  {"stride", pair(stride.value_or(kernel))},
                  {"padding", pads2(padding)},
                  {"dilation", pair(dilation)},
                  {"ceil_mode", ceil_mode}},
                 loc);
}

Tensor avg_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride, Int2 padding,
                  bool ceil_mode, bool count_include_pad, Loc loc) {
  return run_op1(OpKind::AvgPool, {x},
                 {{"kernel", pair(kernel)},
                  {"stride", pair(stride.value_or(kernel))},
                  {"padding", pads2(padding)},
                  {"ceil_mode", ceil_mode},
                  {"count_include_pad", count_include_pad}},
                 loc);
}

Tensor global_avg_pool(const Tensor& x, Loc loc) {
  return run_op1(OpKind::GlobalAvgPool, {x}, {}, loc);
}

}  // namespace kiln
