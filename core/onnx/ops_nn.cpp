// ONNX neural-network ops -> kiln linalg/conv/norm ops: Gemm, MatMul, Conv, ConvTranspose,
// pooling (auto_pad resolved here), BatchNormalization, LayerNormalization, InstanceNormalization,
// Softmax/LogSoftmax (flattening semantics before opset 13), Flatten, LRN.
#include <numeric>

#include "core/onnx/import_context.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

// Spatial dims of x ([N, C, *spatial]); kiln's conv and pool ops take 1 or 2.
size_t spatial_dims(N& n, const TensorType& x) {
  if (x.rank() != 3 && x.rank() != 4)
    n.unsupported(std::to_string(x.rank() < 2 ? 0 : x.rank() - 2) +
                  " spatial dims (kiln's conv and pooling take 1 or 2)");
  return x.rank() - 2;
}

void require_float(N& n) {
  if (!is_floating(n.input_type(0).dtype))
    n.unsupported("element type " + std::string(dtype_name(n.input_type(0).dtype)));
}

// Explicit pads (all begins, then all ends) from `pads` or auto_pad, for a window of `extent`
// (the dilated kernel) moving by `stride` over static input sizes.
Ints resolve_pads(N& n, const TensorType& x, const Ints& kernel, const Ints& stride,
                  const Ints& dilation) {
  const size_t s = kernel.size();
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  Ints pads = n.attr_ints("pads", Ints(2 * s, 0));
  if (pads.size() != 2 * s) n.fail("pads needs " + std::to_string(2 * s) + " values");
  if (auto_pad == "NOTSET") return pads;
  if (auto_pad == "VALID") return Ints(2 * s, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") n.fail("unknown auto_pad " + auto_pad);
  for (size_t i = 0; i < s; ++i) {
    const SymInt& d = x.shape[2 + i];
    if (!d.is_static()) n.unsupported("auto_pad SAME on a symbolic dim");
    const int64_t in = d.value(), out = (in + stride[i] - 1) / stride[i];
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - in);
    const int64_t small = total / 2, big = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : big;
    pads[s + i] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

Ints kernel_of(N& n, const TensorType& w, size_t spatial) {
  Ints k = n.attr_ints("kernel_shape");
  if (k.empty())
    for (size_t i = 0; i < spatial; ++i) k.push_back(w.shape[2 + i].hint());
  if (k.size() != spatial) n.fail("kernel_shape needs " + std::to_string(spatial) + " values");
  return k;
}

void map_conv(N& n) {
  require_float(n);
  const TensorType& x = n.input_type(0);
  const size_t s = spatial_dims(n, x);
  const Ints kernel = kernel_of(n, n.input_type(1), s);
  const Ints stride = n.attr_ints("strides", Ints(s, 1));
  const Ints dilation = n.attr_ints("dilations", Ints(s, 1));
  AttrMap a{{"stride", stride},
            {"dilation", dilation},
            {"padding", resolve_pads(n, x, kernel, stride, dilation)},
            {"groups", n.attr_int("group", 1)}};
  std::vector<Value*> in = {n.input(0), n.input(1)};
  if (n.has_input(2)) in.push_back(n.input(2));
  n.set_output(0, n.emit(OpKind::Conv, in, a));
}

void map_conv_transpose(N& n) {
  require_float(n);
  const TensorType& x = n.input_type(0);
  const size_t s = spatial_dims(n, x);
  const Ints kernel = kernel_of(n, n.input_type(1), s);
  const Ints stride = n.attr_ints("strides", Ints(s, 1));
  const Ints dilation = n.attr_ints("dilations", Ints(s, 1));
  Ints out_pad = n.attr_ints("output_padding", Ints(s, 0));
  Ints pads = n.attr_ints("pads", Ints(2 * s, 0));
  const Ints output_shape = n.attr_ints("output_shape");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < s; ++i) {
      const int64_t in = x.shape[2 + i].hint();
      const int64_t want = output_shape.empty() ? in * stride[i]
                                                : output_shape[output_shape.size() - s + i];
      const int64_t full = stride[i] * (in - 1) + out_pad[i] + (kernel[i] - 1) * dilation[i] + 1;
      int64_t total = full - want;
      if (total < 0) {  // more output than the windows cover: extend with output padding
        out_pad[i] -= total;
        total = 0;
      }
      const int64_t small = total / 2, big = total - small;
      const bool upper = auto_pad != "SAME_LOWER";
      pads[i] = upper ? small : big;
      pads[s + i] = upper ? big : small;
    }
  } else if (auto_pad == "VALID") {
    pads.assign(2 * s, 0);
  }
  AttrMap a{{"stride", stride}, {"dilation", dilation}, {"padding", pads},
            {"output_padding", out_pad}, {"groups", n.attr_int("group", 1)}};
  std::vector<Value*> in = {n.input(0), n.input(1)};
  if (n.has_input(2)) in.push_back(n.input(2));
  n.set_output(0, n.emit(OpKind::ConvTranspose, in, a));
}

void map_pool(N& n, bool is_max) {
  const TensorType& x = n.input_type(0);
  const size_t s = spatial_dims(n, x);
  if (is_max && n.has_output(1)) n.unsupported("the Indices output");
  if (is_max) n.require_attr_int("storage_order", 0);
  const Ints kernel = n.attr_ints("kernel_shape");
  if (kernel.size() != s) n.fail("kernel_shape needs " + std::to_string(s) + " values");
  const Ints stride = n.attr_ints("strides", Ints(s, 1));
  const Ints dilation = is_max ? n.attr_ints("dilations", Ints(s, 1)) : Ints(s, 1);
  if (!is_max && n.has_attr("dilations")) n.unsupported("AveragePool dilations");
  const Ints pads = resolve_pads(n, x, kernel, stride, dilation);
  for (size_t i = 0; i < s; ++i) {
    const int64_t extent = dilation[i] * (kernel[i] - 1) + 1;
    if (pads[i] > extent / 2 || pads[s + i] > extent / 2)
      n.unsupported("padding larger than half the window (kiln's pooling limit)");
  }
  AttrMap a{{"kernel", kernel}, {"stride", stride}, {"padding", pads},
            {"ceil_mode", bool(n.attr_int("ceil_mode", 0))}};
  if (is_max) a.set("dilation", dilation);
  else a.set("count_include_pad", bool(n.attr_int("count_include_pad", 0)));
  n.set_output(0, n.emit(is_max ? OpKind::MaxPool : OpKind::AvgPool, {n.input(0)}, a));
}

// Softmax family: opset < 13 flattens to [prod(d[:axis]), prod(d[axis:])] first.
void map_softmax(N& n, OpKind kind) {
  require_float(n);
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", n.opset() < 13 ? 1 : -1), rank);
  if (n.opset() >= 13 || axis == rank - 1) {
    n.set_output(0, n.emit(kind, {x}, {{"dim", axis}}));
    return;
  }
  SymInt outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    if (i < axis) outer = outer * x->type.shape[size_t(i)];
    else inner = inner * x->type.shape[size_t(i)];
  Value* flat = n.reshape(x, {outer, inner});
  n.set_output(0, n.reshape(n.emit(kind, {flat}, {{"dim", int64_t(1)}}), x->type.shape));
}

void map_batch_norm(N& n) {
  require_float(n);
  if (n.attr_int("training_mode", 0) != 0) n.unsupported("training_mode=1");
  if (n.attr_int("spatial", 1) != 1) n.unsupported("spatial=0 (opset < 9)");
  for (size_t i = 1; i < n.num_outputs(); ++i)
    if (n.has_output(i)) n.unsupported("training outputs (running mean/var)");
  AttrMap a{{"eps", n.attr_float("epsilon", 1e-5)}};
  // kiln order: x, running_mean, running_var, weight, bias.
  n.set_output(0, n.emit(OpKind::BatchNorm,
                         {n.input(0), n.input(3), n.input(4), n.input(1), n.input(2)}, a));
}

void map_layer_norm(N& n) {
  require_float(n);
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", -1), rank);
  const double eps = n.attr_float("epsilon", 1e-5);
  const Shape normalized(x->type.shape.begin() + axis, x->type.shape.end());
  auto fit = [&](Value* p) {  // Scale/B may be given with fewer dims: broadcast to x.shape[axis:]
    return p->type.rank() == normalized.size() ? p : n.emit(OpKind::Expand, {p}, {{"shape", normalized}});
  };
  std::vector<Value*> in = {x, fit(n.input(1))};
  if (n.has_input(2)) in.push_back(fit(n.input(2)));
  n.set_output(0, n.emit(OpKind::LayerNorm, in, {{"axis", axis}, {"eps", eps}}));
  if (n.has_output(1) || n.has_output(2)) {
    Ints dims;
    for (int64_t i = axis; i < rank; ++i) dims.push_back(i);
    Value* mean = n.emit(OpKind::Mean, {x}, {{"dims", dims}, {"keepdim", true}});
    Value* d = n.emit(OpKind::Sub, {x, mean});
    Value* var = n.emit(OpKind::Mean, {n.emit(OpKind::Mul, {d, d})}, {{"dims", dims}, {"keepdim", true}});
    Value* inv = n.emit(OpKind::Rsqrt, {n.emit(OpKind::Add, {var, n.scalar(eps, x->type.dtype)})});
    n.set_output(1, mean);
    n.set_output(2, inv);
  }
}

void map_instance_norm(N& n) {
  require_float(n);
  Value* x = n.input(0);
  if (x->type.rank() < 3) n.fail("input must be [N, C, *spatial]");
  const SymInt& c = x->type.shape[1];
  if (!c.is_static()) n.unsupported("a symbolic channel count");
  n.set_output(0, n.emit(OpKind::GroupNorm, {x, n.input(1), n.input(2)},
                         {{"num_groups", c.value()}, {"eps", n.attr_float("epsilon", 1e-5)}}));
}

void map_flatten(N& n) {
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -rank || axis > rank) n.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  SymInt outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    if (i < axis) outer = outer * x->type.shape[size_t(i)];
    else inner = inner * x->type.shape[size_t(i)];
  n.set_output(0, n.reshape(x, {outer, inner}));
}

// LRN: x / (bias + alpha/size * sum of x^2 over `size` neighbouring channels)^beta. The channel
// window sum is an average pool over a [N, 1, C, H*W] view.
void map_lrn(N& n) {
  require_float(n);
  Value* x = n.input(0);
  const Shape& shape = x->type.shape;
  if (shape.size() < 3) n.fail("input must be [N, C, *spatial]");
  const int64_t size = n.attr_int("size", 1);
  SymInt rest = 1;
  for (size_t i = 2; i < shape.size(); ++i) rest = rest * shape[i];
  Value* sq = n.reshape(n.emit(OpKind::Mul, {x, x}), {shape[0], 1, shape[1], rest});
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  sq = n.emit(OpKind::Pad, {sq}, {{"pads", Ints{0, 0, before, 0, 0, 0, after, 0}}});
  Value* avg = n.emit(OpKind::AvgPool, {sq}, {{"kernel", Ints{size, 1}}});
  Value* sum = n.reshape(avg, shape);  // avg * size == sum; alpha/size * sum == alpha * avg
  const DType dt = x->type.dtype;
  Value* base = n.emit(OpKind::Add, {n.scalar(n.attr_float("bias", 1.0), dt),
                                     n.emit(OpKind::Mul, {sum, n.scalar(n.attr_float("alpha", 1e-4), dt)})});
  Value* den = n.emit(OpKind::Pow, {base, n.scalar(n.attr_float("beta", 0.75), dt)});
  n.set_output(0, n.emit(OpKind::Div, {x, den}));
}

}  // namespace

void register_nn_ops(OpTable& t) {
  t["Gemm"] = [](N& n) {
    std::vector<Value*> in = {n.input(0), n.input(1)};
    if (n.has_input(2)) in.push_back(n.input(2));
    n.set_output(0, n.emit(OpKind::Gemm, in,
                           {{"alpha", n.attr_float("alpha", 1.0)},
                            {"beta", n.attr_float("beta", 1.0)},
                            {"trans_a", bool(n.attr_int("transA", 0))},
                            {"trans_b", bool(n.attr_int("transB", 0))}}));
  };
  t["MatMul"] = [](N& n) { n.set_output(0, n.emit(OpKind::MatMul, {n.input(0), n.input(1)})); };
  t["Conv"] = map_conv;
  t["ConvTranspose"] = map_conv_transpose;
  t["MaxPool"] = [](N& n) { map_pool(n, true); };
  t["AveragePool"] = [](N& n) { map_pool(n, false); };
  t["GlobalAveragePool"] = [](N& n) {
    require_float(n);
    n.set_output(0, n.emit(OpKind::GlobalAvgPool, {n.input(0)}));
  };
  t["GlobalMaxPool"] = [](N& n) {
    Value* x = n.input(0);
    Ints dims;
    for (size_t i = 2; i < x->type.rank(); ++i) dims.push_back(int64_t(i));
    n.set_output(0, n.emit(OpKind::ReduceMax, {x}, {{"dims", dims}, {"keepdim", true}}));
  };
  t["BatchNormalization"] = map_batch_norm;
  t["LayerNormalization"] = map_layer_norm;
  t["InstanceNormalization"] = map_instance_norm;
  t["Softmax"] = [](N& n) { map_softmax(n, OpKind::Softmax); };
  t["LogSoftmax"] = [](N& n) { map_softmax(n, OpKind::LogSoftmax); };
  t["Flatten"] = map_flatten;
  t["LRN"] = map_lrn;
}

}  // namespace kiln::onnx::detail
