// Gradient rules of convolution and pooling, written in kiln's own ops:
// - conv: the input's gradient is a conv_transpose of the output's gradient with the same weight,
//   the weight's one conv_weight_grad op. Backends without kernels of their own for those two run
//   them as convs and matmuls (their expansions, conv_expand.cpp); oneDNN runs them as they are;
// - conv_transpose: the same adjoint pair the other way round;
// - conv_weight_grad: bilinear, so its gradients are a conv and a conv_transpose;
// - max pooling: one max_pool_grad op, whose kernels find each window's winning tap once;
// - average pooling: each kernel tap reads a strided slice of the padded input, so a tap's share of
//   the gradient goes back by the inverse placement: zeros interleaved by the stride, then padding.
#include <cmath>
#include <limits>

#include "core/ir/grad_builder.h"
#include "core/ir/op.h"
#include "core/ir/ops/conv_window.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

Value* bias_grad(G& b, Value* g) {
  std::vector<int64_t> dims = {0};
  for (size_t i = 2; i < g->type.rank(); ++i) dims.push_back(int64_t(i));
  return b.sum(g, dims, false);
}

// The conv's attributes for one of its gradient ops, the window's sizes as the "kernel" attribute
// of conv_weight_grad.
AttrMap window_attrs(const Window& w, int64_t groups) {
  AttrMap attrs;
  attrs.set("stride", w.stride);
  attrs.set("padding", w.pads());
  attrs.set("dilation", w.dilation);
  attrs.set("groups", groups);
  return attrs;
}

AttrMap weight_grad_attrs(const Window& w, int64_t groups) {
  AttrMap attrs = window_attrs(w, groups);
  attrs.set("kernel", w.kernel);
  return attrs;
}

// The output padding that gives a conv_transpose from a conv's output back the conv's input size:
// what the last stride left over.
std::vector<int64_t> output_padding_to(G& b, const Window& w, const Value* input, const Value* output) {
  const std::vector<int64_t> in = spatial_of(b, input, "input"), out = spatial_of(b, output, "output");
  std::vector<int64_t> padding;
  for (size_t i = 0; i < w.spatial; ++i)
    padding.push_back(in[i] + w.pad_begin[i] + w.pad_end[i] - w.extent(i) - (out[i] - 1) * w.stride[i]);
  return padding;
}

std::vector<Value*> conv_grad(G& b) {
  Value* x = b.input(0);
  Value* weight = b.input(1);
  const Window w = window(b, spatial_of(b, weight, "weight"));
  const int64_t groups = b.attrs().get_int("groups");
  Value* g = b.grad();
  std::vector<Value*> out(b.node().inputs.size(), nullptr);
  if (b.wanted(0)) {
    AttrMap attrs = window_attrs(w, groups);
    attrs.set("output_padding", output_padding_to(b, w, x, b.output()));
    out[0] = b.op(K::ConvTranspose, {g, weight}, attrs);
  }
  if (b.wanted(1)) out[1] = b.op(K::ConvWeightGrad, {x, g}, weight_grad_attrs(w, groups));
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
  // Rows of output padding beyond a stride give the conv one more output row: cropped.
  if (b.wanted(0)) out[0] = crop_spatial(b, b.op(K::Conv, {g, weight}, window_attrs(w, groups)), spatial_of(b, x, "input"));
  if (b.wanted(1)) {
    // The weight gradient of the conv from the output's gradient to x, the gradient padded as the
    // transpose's output was cropped (the output padding already supplies part of the end).
    Window padded = w;
    for (size_t i = 0; i < w.spatial; ++i) padded.pad_end[i] = std::max<int64_t>(0, w.pad_end[i] - output_padding[i]);
    out[1] = b.op(K::ConvWeightGrad, {g, x}, weight_grad_attrs(padded, groups));
  }
  if (out.size() == 3 && b.wanted(2)) out[2] = bias_grad(b, g);
  return out;
}

// conv_weight_grad(x, g) = dW is bilinear, the adjoint of the conv's weight: <V, dW> =
// <g, conv(x, V)>. So V's gradient flows to g as conv(x, V) (cropped to g, which may stop short of
// the conv's output) and to x as the adjoint of conv in x, conv_transpose(g, V).
std::vector<Value*> conv_weight_grad_grad(G& b) {
  Value* x = b.input(0);
  Value* g = b.input(1);
  const Window w = window(b, b.attrs().get_ints("kernel"));
  const int64_t groups = b.attrs().get_int("groups");
  Value* v = b.grad();
  std::vector<Value*> out(2, nullptr);
  if (b.wanted(0)) {
    // Input rows past g's last window reach no window: a conv_transpose's output padding covers
    // less than a stride of them, zeros the rest.
    std::vector<int64_t> output_padding = output_padding_to(b, w, x, g), zeros(2 * x->type.rank(), 0);
    bool padded = false;
    for (size_t i = 0; i < w.spatial; ++i) {
      const int64_t most = std::max(w.stride[i], w.dilation[i]) - 1;
      zeros[x->type.rank() + 2 + i] = std::max<int64_t>(0, output_padding[i] - most);
      padded = padded || output_padding[i] > most;
      output_padding[i] = std::min(output_padding[i], most);
    }
    AttrMap attrs = window_attrs(w, groups);
    attrs.set("output_padding", output_padding);
    out[0] = b.op(K::ConvTranspose, {g, v}, attrs);
    if (padded) out[0] = b.pad(out[0], zeros);
  }
  if (b.wanted(1)) out[1] = crop_spatial(b, b.op(K::Conv, {x, v}, window_attrs(w, groups)), spatial_of(b, g, "output gradient"));
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
  set_rule(t, K::ConvWeightGrad, conv_weight_grad_grad);
}

}  // namespace kiln::ops
