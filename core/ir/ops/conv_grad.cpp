// Gradient rules of convolution and pooling, written in kiln's own ops:
// - conv: the input's gradient is the conv that equals a conv_transpose of the output's gradient
//   with the same weight (the gradient spread by the stride, the weight mirrored); the weight's is
//   one matmul of the output's gradient by the input's columns (im2col) for an ungrouped conv, and
//   a correlation of the input with the output's gradient (a conv in which stride and dilation
//   swap roles), every group and part of the batch as one grouped conv, for a grouped one;
// - conv_transpose: the same adjoint pair the other way round;
// - max pooling: one max_pool_grad op, whose kernels find each window's winning tap once;
// - average pooling: each kernel tap reads a strided slice of the padded input, so a tap's share of
//   the gradient goes back by the inverse placement: zeros interleaved by the stride, then padding.
#include <cmath>
#include <limits>

#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

// A window op's per-spatial-dim attributes, ONNX defaults filled.
struct Window {
  size_t spatial = 0;
  std::vector<int64_t> kernel, stride, dilation, pad_begin, pad_end;

  std::vector<int64_t> pads() const {  // the attribute's order: begins, then ends
    std::vector<int64_t> p = pad_begin;
    p.insert(p.end(), pad_end.begin(), pad_end.end());
    return p;
  }
  int64_t extent(size_t i) const { return dilation[i] * (kernel[i] - 1) + 1; }
};

std::vector<int64_t> per_dim(const G& b, const char* name, size_t count, int64_t fill) {
  if (!b.attrs().has(name)) return std::vector<int64_t>(count, fill);
  std::vector<int64_t> v = b.attrs().get_ints(name);
  if (v.empty()) v.assign(count, fill);
  return v;
}

Window window(const G& b, std::vector<int64_t> kernel) {
  Window w;
  w.spatial = b.input(0)->type.rank() - 2;
  w.kernel = std::move(kernel);
  w.stride = per_dim(b, "stride", w.spatial, 1);
  w.dilation = per_dim(b, "dilation", w.spatial, 1);
  const std::vector<int64_t> pads = per_dim(b, "padding", 2 * w.spatial, 0);
  w.pad_begin.assign(pads.begin(), pads.begin() + long(w.spatial));
  w.pad_end.assign(pads.begin() + long(w.spatial), pads.end());
  return w;
}

// The spatial dims of `v` ([N, C, *spatial]) as numbers.
std::vector<int64_t> spatial_of(const G& b, const Value* v, const char* what) {
  std::vector<int64_t> out;
  for (size_t i = 2; i < v->type.rank(); ++i) {
    if (!v->type.shape[i].is_static())
      b.fail(std::string("the gradient needs the ") + what + "'s spatial sizes as numbers, got " + v->type.str());
    out.push_back(v->type.shape[i].value());
  }
  return out;
}

int64_t channels_of(const G& b, const Value* v, const char* what) {
  if (!v->type.shape[1].is_static())
    b.fail(std::string("the gradient needs the ") + what + "'s channels as a number, got " + v->type.str());
  return v->type.shape[1].value();
}

std::vector<int64_t> iota(size_t from, size_t to) {
  std::vector<int64_t> v;
  for (size_t i = from; i < to; ++i) v.push_back(int64_t(i));
  return v;
}

// `v` sliced to its first `sizes` along the spatial dims (no-op where they already agree).
Value* crop_spatial(G& b, Value* v, const std::vector<int64_t>& sizes) {
  const std::vector<int64_t> have = spatial_of(b, v, "gradient");
  if (have == sizes) return v;
  const std::vector<int64_t> axes = iota(2, 2 + sizes.size());
  return b.slice(v, axes, std::vector<int64_t>(sizes.size(), 0), sizes, std::vector<int64_t>(sizes.size(), 1));
}

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
        parts * weight_elements <= (int64_t(1) << 22))
      best = parts;
  return best;
}

// The coordinates of row-major index `i` over `dims`.
std::vector<int64_t> row_major_coords(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (size_t d = dims.size(); d-- > 0; i /= dims[d]) c[d] = i % dims[d];
  return c;
}

// The columns the weight gradient multiplies may take at most this many elements (256 MiB of f32),
// and their gather index (taps x output pixels, a constant) this many.
constexpr int64_t kMaxColumnElements = int64_t(1) << 26, kMaxGatherIndex = int64_t(1) << 22;

// The weight gradient of an ungrouped conv as one matmul, the shape the matmul templates run best:
// dW[co, (tap, ci)] = sum over rows (n, o) of gout[n, co, o] * cols[(n, o), (tap, ci)], where cols
// holds, per kernel tap, the input element that tap reads for pixel o (im2col), gathered from the
// padded input, its channels last, by one index_select with a constant index. Its K is the batch
// times the output's pixels, so the batch splits into parts (batch_split) as a batched matmul
// whose results are summed. nullptr (the grouped-conv form) for a symbolic batch, columns or an index past their
// bounds, or windows that reach past the padded input.
Value* correlate_as_matmul(G& b, Value* input, Value* gout, const Window& w, const std::vector<int64_t>& pad_end) {
  const size_t s = w.spatial;
  if (!input->type.shape[0].is_static()) return nullptr;
  const int64_t n = input->type.shape[0].value();
  const int64_t ci = channels_of(b, input, "input"), co = channels_of(b, gout, "output gradient");
  const std::vector<int64_t> osp = spatial_of(b, gout, "output gradient");
  int64_t taps = 1, pixels = 1;
  for (int64_t k : w.kernel) taps *= k;
  for (int64_t o : osp) pixels *= o;
  if (n * pixels * taps * ci > kMaxColumnElements || taps * pixels > kMaxGatherIndex) return nullptr;
  const std::vector<int64_t> in = spatial_of(b, input, "input");
  std::vector<int64_t> pads(2 * (s + 2), 0), plane_dims(s);
  bool padded = false;
  int64_t plane = 1;
  for (size_t i = 0; i < s; ++i) {
    pads[2 + i] = w.pad_begin[i];
    pads[s + 4 + i] = pad_end[i];
    padded = padded || w.pad_begin[i] != 0 || pad_end[i] != 0;
    plane_dims[i] = in[i] + w.pad_begin[i] + pad_end[i];
    plane *= plane_dims[i];
    if ((osp[i] - 1) * w.stride[i] + w.extent(i) > plane_dims[i]) return nullptr;
  }
  Value* x = padded ? b.pad(input, pads) : input;
  // The input channels last, [N, plane, Ci], so that each gathered row of Ci channels is read in
  // order: the columns gathered at once, for each output pixel and tap (row-major), from the offset
  // in a padded channel plane of the input element it reads. -> [N, pixels * taps, Ci].
  std::vector<int64_t> channels_last = {0};
  for (size_t i = 0; i < s; ++i) channels_last.push_back(int64_t(2 + i));
  channels_last.push_back(1);
  x = b.reshape(b.permute(x, channels_last), {n, plane, ci});
  std::vector<double> offsets;
  offsets.reserve(size_t(taps * pixels));
  for (int64_t o = 0; o < pixels; ++o) {
    const std::vector<int64_t> p = row_major_coords(o, osp);
    for (int64_t t = 0; t < taps; ++t) {
      const std::vector<int64_t> k = row_major_coords(t, w.kernel);
      int64_t offset = 0;
      for (size_t i = 0; i < s; ++i) offset = offset * plane_dims[i] + p[i] * w.stride[i] + k[i] * w.dilation[i];
      offsets.push_back(double(offset));
    }
  }
  Value* index = b.constant(offsets, {taps * pixels}, plane < (int64_t(1) << 31) ? DType::I32 : DType::I64);
  Value* stacked = b.op(K::IndexSelect, {x, index}, {{"dim", int64_t(1)}});
  const int64_t parts = batch_split(input, gout, co * ci * taps);
  const int64_t rows = n / parts * pixels;
  // [N, pixels * taps, Ci] -> [P, rows, taps * Ci]
  Value* cols = b.reshape(stacked, {parts, rows, taps * ci});
  // gout [N, Co, *osp] -> [P, N / P, Co, pixels] -> [P, Co, rows]
  Value* g = b.reshape(gout, {parts, n / parts, co, pixels});
  g = b.reshape(b.permute(g, {0, 2, 1, 3}), {parts, co, rows});
  Value* dw = b.op(K::MatMul, {g, cols});  // [P, Co, taps * Ci]
  dw = parts > 1 ? b.sum(dw, {0}, false) : b.reshape(dw, {co, taps * ci});
  // [Co, taps, Ci] -> [Co, Ci, taps] -> [Co, Ci, *kernel]
  Shape kernel = {SymInt(co), SymInt(ci)};
  for (int64_t k : w.kernel) kernel.push_back(SymInt(k));
  return b.reshape(b.permute(b.reshape(dw, {co, taps, ci}), {0, 2, 1}), kernel);
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

// The input gradient of a conv as a conv (the conv templates' shape) instead of a conv_transpose:
// the output gradient, with stride - 1 zeros between its elements, padded by the kernel's extent
// less the forward padding, against the weight flipped in space with its channels swapped per
// group. A stride of s spends s^2 - 1 of every s^2 multiplies on those zeros; the templates still
// run it faster than the generic conv_transpose. nullptr where a forward padding is wider than the
// kernel's extent (a crop of the gradient, not a pad).
Value* input_grad_as_conv(G& b, Value* g, Value* weight, const Window& w, const std::vector<int64_t>& output_padding,
                          int64_t groups) {
  std::vector<int64_t> pads(2 * w.spatial), axes, keep;
  bool crop = false;
  const std::vector<int64_t> out = spatial_of(b, g, "output gradient");
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
  return b.op(K::Conv, {g, flipped}, attrs);
}

Value* bias_grad(G& b, Value* g) {
  std::vector<int64_t> dims = {0};
  for (size_t i = 2; i < g->type.rank(); ++i) dims.push_back(int64_t(i));
  return b.sum(g, dims, false);
}

std::vector<Value*> conv_grad(G& b) {
  Value* x = b.input(0);
  Value* weight = b.input(1);
  const std::vector<int64_t> kernel = spatial_of(b, weight, "weight");
  const Window w = window(b, kernel);
  const int64_t groups = b.attrs().get_int("groups");
  Value* g = b.grad();
  std::vector<Value*> out(b.node().inputs.size(), nullptr);
  if (b.wanted(0)) {
    // The transpose's output size falls short of the input's by what the last stride left over.
    const std::vector<int64_t> in = spatial_of(b, x, "input"), outs = spatial_of(b, b.output(), "output");
    std::vector<int64_t> output_padding;
    for (size_t i = 0; i < w.spatial; ++i)
      output_padding.push_back(in[i] + w.pad_begin[i] + w.pad_end[i] - w.extent(i) - (outs[i] - 1) * w.stride[i]);
    out[0] = input_grad_as_conv(b, g, weight, w, output_padding, groups);
    if (!out[0]) {
      AttrMap attrs;
      attrs.set("stride", w.stride);
      attrs.set("padding", w.pads());
      attrs.set("output_padding", output_padding);
      attrs.set("dilation", w.dilation);
      attrs.set("groups", groups);
      out[0] = b.op(K::ConvTranspose, {g, weight}, attrs);
    }
  }
  if (b.wanted(1)) out[1] = correlate(b, x, g, w, w.pad_end, groups);
  if (out.size() == 3 && b.wanted(2)) out[2] = bias_grad(b, g);
  return out;
}

std::vector<Value*> conv_transpose_grad(G& b) {
  Value* x = b.input(0);
  Value* weight = b.input(1);
  const Window w = window(b, spatial_of(b, weight, "weight"));
  const std::vector<int64_t> output_padding = per_dim(b, "output_padding", w.spatial, 0);
  const int64_t groups = b.attrs().get_int("groups");
  Value* g = b.grad();
  std::vector<Value*> out(b.node().inputs.size(), nullptr);
  if (b.wanted(0)) {
    AttrMap attrs;
    attrs.set("stride", w.stride);
    attrs.set("padding", w.pads());
    attrs.set("dilation", w.dilation);
    attrs.set("groups", groups);
    // Rows of output padding beyond a stride give the conv one more output row: cropped.
    out[0] = crop_spatial(b, b.op(K::Conv, {g, weight}, attrs), spatial_of(b, x, "input"));
  }
  if (b.wanted(1)) {
    // The output gradient padded as the transpose's output was cropped; the output padding
    // already supplies part of the end.
    std::vector<int64_t> pad_end;
    for (size_t i = 0; i < w.spatial; ++i) pad_end.push_back(std::max<int64_t>(0, w.pad_end[i] - output_padding[i]));
    out[1] = correlate(b, g, x, w, pad_end, groups);
  }
  if (out.size() == 3 && b.wanted(2)) out[2] = bias_grad(b, g);
  return out;
}

// Pooling: the input padded (with `fill`) so that every window's every tap lies inside it.
struct Taps {
  Window w;
  std::vector<int64_t> in, out, padded;  // spatial sizes
  std::vector<int64_t> pads;             // of the pad op over all dims
};

// `pooled`: the pool's output (or a value of its shape).
Taps taps_of(G& b, const Value* pooled) {
  Taps t;
  t.w = window(b, b.attrs().get_ints("kernel"));
  t.in = spatial_of(b, b.input(0), "input");
  t.out = spatial_of(b, pooled, "output");
  const size_t rank = b.input(0)->type.rank();
  t.pads.assign(2 * rank, 0);
  for (size_t i = 0; i < t.w.spatial; ++i) {
    const int64_t need = (t.out[i] - 1) * t.w.stride[i] + t.w.extent(i);
    t.padded.push_back(need);
    t.pads[2 + i] = t.w.pad_begin[i];
    t.pads[rank + 2 + i] = need - t.in[i] - t.w.pad_begin[i];
  }
  return t;
}

// The taps in the kernel's row-major order (the order the forward scans a window in).
std::vector<std::vector<int64_t>> tap_offsets(const Window& w) {
  std::vector<std::vector<int64_t>> all = {{}};
  for (size_t i = 0; i < w.spatial; ++i) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& prefix : all)
      for (int64_t k = 0; k < w.kernel[i]; ++k) {
        next.push_back(prefix);
        next.back().push_back(k);
      }
    all = std::move(next);
  }
  return all;
}

// What tap `offset` reads: padded[o * stride + offset * dilation] for every output position o.
Value* tap(G& b, Value* padded, const Taps& t, const std::vector<int64_t>& offset) {
  std::vector<int64_t> starts, ends;
  for (size_t i = 0; i < t.w.spatial; ++i) {
    starts.push_back(offset[i] * t.w.dilation[i]);
    ends.push_back(starts.back() + (t.out[i] - 1) * t.w.stride[i] + 1);
  }
  return b.slice(padded, iota(2, 2 + t.w.spatial), starts, ends, t.w.stride);
}

// The adjoint of `tap`: v [N, C, *out] placed at the tap's positions of the padded extent.
Value* untap(G& b, Value* v, const Taps& t, const std::vector<int64_t>& offset) {
  const size_t s = t.w.spatial;
  v = b.dilate(v, iota(2, 2 + s), t.w.stride);
  const size_t rank = 2 + s;
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t i = 0; i < s; ++i) {
    pads[2 + i] = offset[i] * t.w.dilation[i];
    pads[rank + 2 + i] = t.padded[i] - pads[2 + i] - t.out[i] * t.w.stride[i];  // < 0 crops
  }
  return b.pad(v, pads);
}

// Sums the taps' placed shares and crops the padding away.
Value* gather_taps(G& b, const Taps& t, const std::vector<Value*>& shares) {
  const std::vector<std::vector<int64_t>> offsets = tap_offsets(t.w);
  Value* total = nullptr;
  for (size_t k = 0; k < offsets.size(); ++k) {
    Value* placed = untap(b, shares[k], t, offsets[k]);
    total = total ? b.op(K::Add, {total, placed}) : placed;
  }
  std::vector<int64_t> crop;
  for (int64_t p : t.pads) crop.push_back(-p);
  return b.pad(total, crop);
}

// The first tap (in scan order) that holds the window's maximum takes the whole gradient, as the
// forward keeps the first maximum it meets: one max_pool_grad op, whose kernels find each window's
// winning tap once.
std::vector<Value*> max_pool_grad(G& b) {
  return {b.op(K::MaxPoolGrad, {b.input(0), b.grad()}, b.attrs())};
}

// max_pool_grad is linear in the output gradient g: each window's g lands on its winning tap. Its
// adjoint reads the incoming gradient u at each window's winning tap: per tap, where that tap is
// the window's first maximum (x's taps compared with max_pool(x)), the tap's strided slice of u.
// x's gradient is zero: the winning taps change only where x ties.
std::vector<Value*> max_pool_grad_grad(G& b) {
  if (!b.wanted(1)) return {nullptr, nullptr};
  const Taps t = taps_of(b, b.input(1));
  Value* x = b.input(0);
  Value* y = b.op(K::MaxPool, {x}, b.attrs());
  Value* u = b.grad();
  Value* padded_x = b.pad(x, t.pads, -std::numeric_limits<double>::infinity());
  Value* padded_u = b.pad(u, t.pads);
  Value* zero = b.scalar(0, u->type.dtype);
  Value* taken = nullptr;
  Value* total = nullptr;
  for (const std::vector<int64_t>& offset : tap_offsets(t.w)) {
    Value* hit = b.op(K::Eq, {tap(b, padded_x, t, offset), y});
    Value* first = taken ? b.op(K::LogicalAnd, {hit, b.op(K::LogicalNot, {taken})}) : hit;
    taken = taken ? b.op(K::LogicalOr, {taken, hit}) : hit;
    Value* share = b.op(K::Where, {first, tap(b, padded_u, t, offset), zero});
    total = total ? b.op(K::Add, {total, share}) : share;
  }
  return {nullptr, total};
}

// Every tap gets g / count, count being the forward's divisor at that output position: windows
// clipped to the padded input (what count_include_pad counts), then to the input itself.
std::vector<Value*> avg_pool_grad(G& b) {
  const Taps t = taps_of(b, b.output());
  const bool include_pad = b.attrs().get_bool("count_include_pad");
  std::vector<std::vector<double>> counts(t.w.spatial);
  for (size_t i = 0; i < t.w.spatial; ++i)
    for (int64_t o = 0; o < t.out[i]; ++o) {
      const int64_t begin = o * t.w.stride[i] - t.w.pad_begin[i];
      const int64_t end = std::min(begin + t.w.kernel[i], t.in[i] + t.w.pad_end[i]);
      const int64_t inside = std::min(end, t.in[i]) - std::max<int64_t>(begin, 0);
      counts[i].push_back(double(include_pad ? end - begin : inside));
    }
  std::vector<double> divisor = {1};
  for (const std::vector<double>& along : counts) {  // the outer product over the spatial dims
    std::vector<double> next;
    for (double d : divisor)
      for (double c : along) next.push_back(d * c);
    divisor = std::move(next);
  }
  for (double& d : divisor) d = std::max(d, 1.0);
  Value* g = b.grad();
  Value* share = b.op(K::Div, {g, b.constant(divisor, t.out, g->type.dtype)});
  return {gather_taps(b, t, std::vector<Value*>(tap_offsets(t.w).size(), share))};
}

// The mean over the spatial dims.
std::vector<Value*> global_avg_pool_grad(G& b) {
  Value* x = b.input(0);
  const std::vector<int64_t> sp = spatial_of(b, x, "input");
  double count = 1;
  for (int64_t d : sp) count *= double(d);
  Value* spread = b.expand(b.grad(), x->type.shape);
  return {b.op(K::Div, {spread, b.scalar(count, x->type.dtype)})};
}

// The channels-last layout is chosen after autodiff, for a backend's kernels: the rules below are
// written for channels-first activations.
template <std::vector<Value*> (*rule)(G&)>
std::vector<Value*> channels_first_only(G& b) {
  if (is_channels_last(b.attrs()))
    b.fail("has no gradient rule for channels-last activations; differentiate the graph before the "
           "channels-last pass");
  return rule(b);
}

}  // namespace

void define_conv_grads(std::vector<OpDef>& t) {
  set_rule(t, K::Conv, channels_first_only<conv_grad>);
  set_rule(t, K::ConvTranspose, conv_transpose_grad);
  set_rule(t, K::MaxPool, channels_first_only<max_pool_grad>);
  set_rule(t, K::AvgPool, channels_first_only<avg_pool_grad>);
  set_rule(t, K::GlobalAvgPool, global_avg_pool_grad);
  set_rule(t, K::MaxPoolGrad, max_pool_grad_grad);
}

}  // namespace kiln::ops
