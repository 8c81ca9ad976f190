// Expansions of the conv family's gradient ops into the ops the conv and matmul templates run
// fast, for backends without kernels of their own for them (the expand-ops pass asks the backend):
// - conv_transpose (a conv's input gradient): one conv of the input spread by the stride against
//   the weight mirrored;
// - conv_weight_grad: one matmul of the output gradient by the input's columns (im2col) for an
//   ungrouped conv; else a correlation of the input with the output gradient (a conv in which
//   stride and dilation swap roles), every group and part of the batch as one grouped conv.
// Both need the spatial sizes and channels as numbers: with symbolic ones the op stays itself.
#include <algorithm>
#include <optional>

#include "core/ir/grad_builder.h"
#include "core/ir/op.h"
#include "core/ir/ops/conv_window.h"
#include "core/ir/ops/im2col.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

// The partial weight gradients of all parts together may take at most this many values.
constexpr int64_t kMaxPartialWeights = int64_t(1) << 22;

// How many parts the weight gradient's reduction over the batch is split into: the correlation's
// output is a few channels by a few taps, so without a split a handful of workgroups would each
// reduce over every image and output position. Each part becomes groups of their own, then a sum
// adds the parts. The sizes must be numbers and the split must divide the batch; parts stop at 64,
// at 4 images and a reduction of 256 per part (fewer images make depthwise convs, which the
// templates run slower at a weight gradient's many taps), and at 4M partial weight values.
int64_t batch_split(const Value* input, const Value* gout, int64_t weight_elements) {
  if (!input->type.shape[0].is_static()) return 1;
  const int64_t batch = input->type.shape[0].value();
  int64_t per_image = 1;
  for (size_t i = 2; i < gout->type.rank(); ++i) {
    if (!gout->type.shape[i].is_static()) return 1;
    per_image *= gout->type.shape[i].value();
  }
  int64_t best = 1;
  for (int64_t parts = 2; parts <= std::min<int64_t>(batch, 64); ++parts)
    if (batch % parts == 0 && batch / parts >= 4 && batch / parts * per_image >= 256 &&
        parts * weight_elements <= kMaxPartialWeights)
      best = parts;
  return best;
}

// The weight gradient of an ungrouped conv as one matmul, the shape the matmul templates run best:
// dW[co, (tap, ci)] = sum over rows (n, o) of gout[n, co, o] * cols[(n, o), (tap, ci)], cols the
// input's columns (im2col). Its K is the batch times the output's pixels, so the batch splits into
// parts (batch_split) as a batched matmul whose results are summed. nullptr (the grouped-conv form)
// where im2col declines.
Value* correlate_as_matmul(G& b, Value* input, Value* gout, const Window& w, const std::vector<int64_t>& pad_end) {
  const std::vector<int64_t> osp = spatial_of(b, gout, "output gradient");
  const std::optional<Columns> cols = im2col(b, input, w, pad_end, osp, ColumnOrder::PixelMajor);
  if (!cols) return nullptr;
  const int64_t n = input->type.shape[0].value(), co = channels_of(b, gout, "output gradient");
  const int64_t ci = channels_of(b, input, "input"), ci_padded = cols->channels, taps = cols->taps;
  const int64_t pixels = cols->pixels;
  // Images of 1024 pixels and more: a part per image, whose output gradient is the left operand as
  // it lies (a part of several images reads it permuted, which the matmul template reads slower:
  // ResNet-18's first-conv weight gradient ran at 14.8 GFLOP/s in 2 parts, BENCHMARKS Run 39).
  const bool per_image = pixels >= 1024 && n * co * ci_padded * taps <= kMaxPartialWeights;
  const int64_t parts = per_image ? n : batch_split(input, gout, co * ci_padded * taps);
  const int64_t rows = n / parts * pixels;
  // [N, pixels, taps * Ci] -> [P, rows, taps * Ci]
  Value* stacked = b.reshape(cols->columns, {parts, rows, taps * ci_padded});
  // gout [N, Co, *osp] -> [P, N / P, Co, pixels] -> [P, Co, rows]
  Value* g = b.reshape(gout, {parts, n / parts, co, pixels});
  g = b.reshape(b.permute(g, {0, 2, 1, 3}), {parts, co, rows});
  Value* dw = b.op(K::MatMul, {g, stacked});  // [P, Co, taps * Ci]
  dw = parts > 1 ? b.sum(dw, {0}, false) : b.reshape(dw, {co, taps * ci_padded});
  // [Co, taps, Ci] -> [Co, Ci, taps] (the padding channels dropped) -> [Co, Ci, *kernel]
  Value* per_channel = b.permute(b.reshape(dw, {co, taps, ci_padded}), {0, 2, 1});
  if (ci_padded != ci) per_channel = b.slice(per_channel, {1}, {0}, {ci}, {1});
  Shape kernel = {SymInt(co), SymInt(ci)};
  for (int64_t k : w.kernel) kernel.push_back(SymInt(k));
  return b.reshape(per_channel, kernel);
}

// dW[co, ci / groups, *kernel] = sum over n and o of gout[n, co, o] * input_padded[n, ci, o * stride
// + k * dilation]: the weight gradient of a conv from `input` to `gout`. It is one grouped conv of
// the input with batch and channels swapped by the output gradient taken as the weight. The batch
// splits into P parts (batch_split), each a group of its own, summed after.
Value* correlate(G& b, Value* input, Value* gout, const Window& w, const std::vector<int64_t>& pad_end,
                 int64_t groups) {
  if (groups == 1)
    if (Value* dw = correlate_as_matmul(b, input, gout, w, pad_end)) return dw;
  const size_t s = w.spatial;
  const int64_t in_group = channels_of(b, input, "input") / groups;
  const int64_t out_group = channels_of(b, gout, "output gradient") / groups;
  int64_t taps = 1;
  for (int64_t k : w.kernel) taps *= k;
  const int64_t parts = batch_split(input, gout, groups * out_group * in_group * taps);
  const SymInt part = parts == 1 ? input->type.shape[0] : SymInt(input->type.shape[0].value() / parts);
  auto tail = [](const Value* v) { return Shape(v->type.shape.begin() + 2, v->type.shape.end()); };
  auto shape = [](Shape head, const Shape& rest) {
    head.insert(head.end(), rest.begin(), rest.end());
    return head;
  };
  auto order = [s](std::vector<int64_t> head) {
    for (size_t i = 0; i < s; ++i) head.push_back(int64_t(head.size()));
    return head;
  };
  // input [P * M, G * Cig, *sp] -> [Cig, G * P * M, *sp]: channel (g * P + p) * M + m.
  Value* x = b.reshape(input, shape({parts, part, groups, in_group}, tail(input)));
  x = b.reshape(b.permute(x, order({3, 2, 0, 1})), shape({in_group, groups * parts * part}, tail(input)));
  // gout [P * M, G * Cog, *osp] -> [G * P * Cog, M, *osp]: the conv's weight, one group per (g, p).
  Value* g = b.reshape(gout, shape({parts, part, groups, out_group}, tail(gout)));
  g = b.reshape(b.permute(g, order({2, 0, 3, 1})), shape({groups * parts * out_group, part}, tail(gout)));
  std::vector<int64_t> pads = w.pad_begin;
  pads.insert(pads.end(), pad_end.begin(), pad_end.end());
  AttrMap attrs;
  attrs.set("stride", w.dilation);
  attrs.set("padding", pads);
  attrs.set("dilation", w.stride);
  attrs.set("groups", groups * parts);
  Value* r = crop_spatial(b, b.op(K::Conv, {x, g}, attrs), w.kernel);  // [Cig, G * P * Cog, *kernel]
  Shape kernel(w.kernel.begin(), w.kernel.end());
  if (parts > 1) {
    r = b.sum(b.reshape(r, shape({in_group, groups, parts, out_group}, kernel)), {2}, false);
    r = b.reshape(r, shape({in_group, groups * out_group}, kernel));
  }
  std::vector<int64_t> swap = {1, 0};
  for (size_t i = 0; i < s; ++i) swap.push_back(int64_t(2 + i));
  return b.permute(r, swap);
}

// A conv_transpose (a conv's input gradient) as a conv, the conv templates' shape: its input, with
// stride - 1 zeros between its elements, padded by the kernel's extent less the padding, against
// the weight flipped in space with its channels swapped per group. A stride of s spends s^2 - 1 of
// every s^2 multiplies on those zeros; the templates still run it faster than the generic
// conv_transpose. nullptr where a padding is wider than the kernel's extent (a crop of the input,
// not a pad).
Value* input_grad_as_conv(G& b, Value* g, Value* weight, Value* bias, const Window& w,
                          const std::vector<int64_t>& output_padding, int64_t groups) {
  std::vector<int64_t> pads(2 * w.spatial), axes, keep;
  bool crop = false;
  const std::vector<int64_t> out = spatial_of(b, g, "input");
  for (size_t i = 0; i < w.spatial; ++i) {
    pads[i] = w.extent(i) - 1 - w.pad_begin[i];
    // The dilated gradient ends with stride - 1 zeros past its last element: part of the end pad.
    pads[w.spatial + i] = w.extent(i) - 1 - w.pad_end[i] + output_padding[i] - (w.stride[i] - 1);
    if (pads[i] < 0 || pads[w.spatial + i] < -(w.stride[i] - 1)) return nullptr;  // past the zeros: a crop
    axes.push_back(int64_t(2 + i));
    keep.push_back(out[i] * w.stride[i] + std::min<int64_t>(0, pads[w.spatial + i]));
    crop = crop || pads[w.spatial + i] < 0;
    pads[w.spatial + i] = std::max<int64_t>(0, pads[w.spatial + i]);
  }
  g = b.dilate(g, axes, w.stride);
  if (crop) g = b.slice(g, axes, std::vector<int64_t>(w.spatial, 0), keep, std::vector<int64_t>(w.spatial, 1));
  const int64_t out_group = b.static_dim(weight, 0, "weight") / groups;
  const int64_t in_group = b.static_dim(weight, 1, "weight");
  Shape kernel(w.kernel.begin(), w.kernel.end());
  auto shape = [&kernel](Shape head) {
    head.insert(head.end(), kernel.begin(), kernel.end());
    return head;
  };
  // weight [G * Cog, Cig, *k] -> [G * Cig, Cog, *k], each tap mirrored.
  std::vector<int64_t> swap = {0, 2, 1}, starts, ends, steps;
  for (size_t i = 0; i < w.spatial; ++i) {
    swap.push_back(int64_t(3 + i));
    starts.push_back(-1);
    ends.push_back(kSliceOpenBegin);  // the whole axis, reversed
    steps.push_back(-1);
  }
  Value* flipped = b.reshape(weight, shape({groups, out_group, in_group}));
  flipped = b.reshape(b.permute(flipped, swap), shape({groups * in_group, out_group}));
  flipped = b.slice(flipped, axes, starts, ends, steps);
  AttrMap attrs;
  attrs.set("stride", std::vector<int64_t>(w.spatial, 1));
  attrs.set("padding", pads);
  attrs.set("dilation", w.dilation);
  attrs.set("groups", groups);
  return b.op(K::Conv, bias ? std::vector<Value*>{g, flipped, bias} : std::vector<Value*>{g, flipped}, attrs);
}

// Whether dims 1 and up of `v` are numbers.
bool static_past_batch(const Value* v) {
  for (size_t i = 1; i < v->type.rank(); ++i)
    if (!v->type.shape[i].is_static()) return false;
  return true;
}

Value* expand_conv_transpose(G& b) {
  Value* x = b.input(0);
  Value* weight = b.input(1);
  if (!static_past_batch(x) || !static_past_batch(weight) || !static_past_batch(b.output())) return nullptr;
  const Window w = window(b, spatial_of(b, weight, "weight"));
  Value* bias = b.node().inputs.size() == 3 ? b.input(2) : nullptr;
  return input_grad_as_conv(b, x, weight, bias, w, per_dim(b, "output_padding", w.spatial, 0),
                            b.attrs().get_int("groups"));
}

Value* expand_conv_weight_grad(G& b) {
  Value* x = b.input(0);
  Value* g = b.input(1);
  if (!static_past_batch(x) || !static_past_batch(g)) return nullptr;
  const Window w = window(b, b.attrs().get_ints("kernel"));
  return correlate(b, x, g, w, w.pad_end, b.attrs().get_int("groups"));
}

// An expansion of a one-output op: its value, or none.
ExpandFn one_output(Value* (*expand)(G&)) {
  return [expand](G& b) {
    Value* v = expand(b);
    return v ? std::vector<Value*>{v} : std::vector<Value*>{};
  };
}

}  // namespace

void define_conv_expansions(std::vector<OpDef>& t) {
  t[size_t(K::ConvTranspose)].expand = one_output(expand_conv_transpose);
  t[size_t(K::ConvWeightGrad)].expand = one_output(expand_conv_weight_grad);
}

}  // namespace kiln::ops
