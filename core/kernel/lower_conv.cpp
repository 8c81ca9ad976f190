// Lowering of conv, conv_transpose and the pools to Reduce kernels over the window of one output
// element, of conv's weight gradient to a Reduce over the batch and output positions per weight
// element, and of max_pool's gradient to an argmax over each window and a gather per input
// element. Out-of-input taps are masked with a select over a clamped (always in-bounds) load. Conv
// and the window pools read and write channels-first or channels-last activations.
#include <cmath>
#include <limits>

#include "core/kernel/lower_util.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

using namespace util;

// Per spatial dim attributes, ONNX defaults for empty lists (as the shape rule).
std::vector<int64_t> spatial_attr(const AttrMap& attrs, const std::string& name, size_t spatial,
                                  size_t per_dim, int64_t fill) {
  std::vector<int64_t> v = attrs.has(name) ? attrs.get_ints(name) : std::vector<int64_t>{};
  if (v.empty()) v.assign(spatial * per_dim, fill);
  return v;
}

// Geometry of one spatial dim: input size, kernel size (param or constant), attributes.
struct Axis {
  ExprRef size;    // input extent
  ExprRef kernel;  // window taps
  int64_t stride = 1, pad = 0, pad_end = 0, dilation = 1;
};

// Where an activation keeps its channels: dim 1 ([N, C, *spatial]), or last (channels_last).
struct Layout {
  bool channels_last = false;
  size_t rank = 4;
  int channel() const { return channels_last ? int(rank) - 1 : 1; }
  int spatial(size_t i) const { return int(i) + (channels_last ? 1 : 2); }
  // An activation's coordinates, in its dim order.
  std::vector<ExprRef> coords(ExprRef n, ExprRef c, const std::vector<ExprRef>& spatial) const {
    std::vector<ExprRef> out = {n};
    if (!channels_last) out.push_back(c);
    out.insert(out.end(), spatial.begin(), spatial.end());
    if (channels_last) out.push_back(c);
    return out;
  }
  Shape spatial_shape(const Shape& x) const {
    return Shape(x.begin() + spatial(0), x.begin() + spatial(0) + long(rank - 2));
  }
};

Layout layout_of(const AttrMap& attrs, const TensorType& x) { return {is_channels_last(attrs), x.rank()}; }

// `x` is the input's spatial extents.
std::vector<Axis> axes_of(KernelBuilder& b, const AttrMap& attrs, const Shape& x,
                          const Shape& kernel) {
  const size_t spatial = x.size();
  const auto stride = spatial_attr(attrs, "stride", spatial, 1, 1);
  const auto pads = spatial_attr(attrs, "padding", spatial, 2, 0);
  const auto dilation = spatial_attr(attrs, "dilation", spatial, 1, 1);
  std::vector<Axis> axes(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    axes[i].size = b.param_for(x[i]);
    // Window sizes are attributes, not tensor sizes: inline, they make the tap arithmetic's
    // divisions by constants.
    axes[i].kernel = kernel[i].is_static() ? iconst(kernel[i].value()) : b.param_for(kernel[i]);
    axes[i].stride = stride[i];
    axes[i].pad = pads[i];
    axes[i].pad_end = pads[spatial + i];
    axes[i].dilation = dilation[i];
  }
  return axes;
}

// Splits the loop counter r into (outer, tap_0, ..., tap_{s-1}), taps row-major innermost.
std::vector<ExprRef> split_taps(const std::vector<Axis>& axes, ExprRef& outer) {
  std::vector<ExprRef> taps(axes.size());
  ExprRef rest = reduction_index();
  for (size_t i = axes.size(); i-- > 0;) {
    taps[i] = imod(rest, axes[i].kernel);
    rest = idiv(rest, axes[i].kernel);
  }
  outer = rest;
  return taps;
}

// Shape of the window: the kernel dims of a weight, or the pool's "kernel" attribute.
Shape weight_kernel(const TensorType& w) { return Shape(w.shape.begin() + 2, w.shape.end()); }

// The "kernel" attribute of a pool or of conv's weight gradient.
Shape kernel_attr(const AttrMap& attrs) {
  Shape kernel;
  for (int64_t k : attrs.get_ints("kernel")) kernel.push_back(SymInt(k));
  return kernel;
}

LoweredKernel conv(const AttrMap& attrs, const std::vector<TensorType>& in, const TensorType& out,
                   int origin) {
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  KernelBuilder b(kernel_name(OpKind::Conv, out.dtype, out.rank()), KernelKind::Reduce, out.shape);
  int xs = b.add_buffer(x.dtype, false);
  int ws = b.add_buffer(w.dtype, false);
  int bias_s = in.size() == 3 ? b.add_buffer(in[2].dtype, false) : -1;
  int os = b.add_buffer(out.dtype, true);
  const int64_t groups = attrs.get_int("groups");
  const Layout layout = layout_of(attrs, x);
  std::vector<Axis> axes = axes_of(b, attrs, layout.spatial_shape(x.shape), weight_kernel(w));
  ExprRef cg = b.param_for(w.shape[1]);                                   // input channels per group
  ExprRef og = b.param_for(out.shape[size_t(layout.channel())] / SymInt(groups));  // output channels per group
  ExprRef o = coord(layout.channel());
  ExprRef ci;
  std::vector<ExprRef> taps = split_taps(axes, ci);
  ExprRef channel = iadd(imul(idiv(o, og), cg), ci);
  std::vector<ExprRef> positions;
  ExprRef inside;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis& a = axes[i];
    ExprRef pos = iadd(isub(imul(coord(layout.spatial(i)), iconst(a.stride)), iconst(a.pad)),
                       imul(taps[i], iconst(a.dilation)));
    inside = land(inside, in_range(pos, a.size));
    positions.push_back(clamp_index(pos, a.size));
  }
  std::vector<ExprRef> xc = layout.coords(coord(0), channel, positions);
  DType acc = accumulate_in(out.dtype);
  ExprRef xv = cast(load(xs, x.dtype, strided_offset(b, xc, x.shape)), acc);
  xv = select(inside, xv, constant(0, acc));
  // Weight [O, C/groups, *kernel] is contiguous in (ci, taps): r is the offset within row o.
  ExprRef w_off = iadd(imul(o, b.param_for(product(w.shape, 1, w.rank()))), reduction_index());
  ExprRef body = fmul(xv, cast(load(ws, w.dtype, w_off), acc), acc);
  ExprRef result = accumulator(acc);
  if (bias_s >= 0) result = fadd(result, cast(load(bias_s, in[2].dtype, o), acc), acc);
  SymInt extent = product(w.shape, 1, w.rank());
  return finish_reduce(b, OpKind::Sum, acc, extent, body, os, out.dtype, result, origin);
}

// Output position p receives input i through tap k when p + pad - k*dil == i*stride.
LoweredKernel conv_transpose(const AttrMap& attrs, const std::vector<TensorType>& in,
                             const TensorType& out, int origin) {
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  KernelBuilder b(kernel_name(OpKind::ConvTranspose, out.dtype, out.rank()), KernelKind::Reduce,
                  out.shape);
  int xs = b.add_buffer(x.dtype, false);
  int ws = b.add_buffer(w.dtype, false);
  int bias_s = in.size() == 3 ? b.add_buffer(in[2].dtype, false) : -1;
  int os = b.add_buffer(out.dtype, true);
  const int64_t groups = attrs.get_int("groups");
  std::vector<Axis> axes = axes_of(b, attrs, Shape(x.shape.begin() + 2, x.shape.end()), weight_kernel(w));
  ExprRef og = b.param_for(w.shape[1]);                    // output channels per group
  ExprRef cg = b.param_for(x.shape[1] / SymInt(groups));   // input channels per group
  ExprRef o = coord(1);
  ExprRef ci;
  std::vector<ExprRef> taps = split_taps(axes, ci);
  ExprRef group = idiv(o, og);
  ExprRef channel = iadd(imul(group, cg), ci);
  std::vector<ExprRef> xc = {coord(0), channel};
  std::vector<ExprRef> wc = {channel, imod(o, og)};
  ExprRef hit;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis& a = axes[i];
    ExprRef num = isub(iadd(coord(int(2 + i)), iconst(a.pad)), imul(taps[i], iconst(a.dilation)));
    // Division and modulo run on a non-negative value (GLSL % is undefined below 0); a negative
    // num is rejected by the range test anyway.
    ExprRef safe = imax(num, iconst(0));
    ExprRef pos = idiv(safe, iconst(a.stride));
    ExprRef ok = land(ige(num, iconst(0)), ilt(pos, a.size));
    if (a.stride != 1) ok = land(ok, ieq(imod(safe, iconst(a.stride)), iconst(0)));
    hit = land(hit, ok);
    xc.push_back(imin(pos, isub(a.size, iconst(1))));
    wc.push_back(taps[i]);
  }
  DType acc = accumulate_in(out.dtype);
  ExprRef xv = cast(load(xs, x.dtype, strided_offset(b, xc, x.shape)), acc);
  ExprRef wv = cast(load(ws, w.dtype, strided_offset(b, wc, w.shape)), acc);
  ExprRef body = select(hit, fmul(xv, wv, acc), constant(0, acc));
  ExprRef result = accumulator(acc);
  if (bias_s >= 0) result = fadd(result, cast(load(bias_s, in[2].dtype, o), acc), acc);
  SymInt extent = (x.shape[1] / SymInt(groups)) * product(w.shape, 2, w.rank());
  return finish_reduce(b, OpKind::Sum, acc, extent, body, os, out.dtype, result, origin);
}

// dW[o, c, *k] = sum over (n, *p) of g[n, o, *p] * x[n, group(o) * cg + c, p * stride - pad + k *
// dilation], taps outside the input masked: the reduction index runs over the batch and g's
// positions, row-major.
LoweredKernel conv_weight_grad(const AttrMap& attrs, const std::vector<TensorType>& in, const TensorType& out,
                               int origin) {
  const TensorType& x = in[0];
  const TensorType& g = in[1];
  KernelBuilder b(kernel_name(OpKind::ConvWeightGrad, out.dtype, out.rank()), KernelKind::Reduce, out.shape);
  int xs = b.add_buffer(x.dtype, false);
  int gs = b.add_buffer(g.dtype, false);
  int os = b.add_buffer(out.dtype, true);
  const int64_t groups = attrs.get_int("groups");
  const Shape positions_shape(g.shape.begin() + 2, g.shape.end());
  std::vector<Axis> axes = axes_of(b, attrs, Shape(x.shape.begin() + 2, x.shape.end()), kernel_attr(attrs));
  ExprRef og = b.param_for(out.shape[0] / SymInt(groups));  // output channels per group
  ExprRef cg = b.param_for(out.shape[1]);                   // input channels per group
  ExprRef o = coord(0);
  ExprRef channel = iadd(imul(idiv(o, og), cg), coord(1));
  ExprRef rest = reduction_index();
  std::vector<ExprRef> p(axes.size());
  for (size_t i = axes.size(); i-- > 0;) {
    ExprRef size = b.param_for(positions_shape[i]);
    p[i] = imod(rest, size);
    rest = idiv(rest, size);
  }
  std::vector<ExprRef> xc = {rest, channel}, gc = {rest, o};
  ExprRef inside;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis& a = axes[i];
    ExprRef pos = iadd(isub(imul(p[i], iconst(a.stride)), iconst(a.pad)), imul(coord(int(2 + i)), iconst(a.dilation)));
    inside = land(inside, in_range(pos, a.size));
    xc.push_back(clamp_index(pos, a.size));
    gc.push_back(p[i]);
  }
  DType acc = accumulate_in(out.dtype);
  ExprRef xv = cast(load(xs, x.dtype, strided_offset(b, xc, x.shape)), acc);
  ExprRef gv = cast(load(gs, g.dtype, strided_offset(b, gc, g.shape)), acc);
  ExprRef body = select(inside, fmul(xv, gv, acc), constant(0, acc));
  SymInt extent = g.shape[0] * product(g.shape, 2, g.rank());
  return finish_reduce(b, OpKind::Sum, acc, extent, body, os, out.dtype, accumulator(acc), origin);
}

// The smallest value of t: the identity of max over padded taps.
ExprRef lowest(DType t) {
  switch (t) {
    case DType::I32: return constant(double(std::numeric_limits<int32_t>::min()), t);
    case DType::I64: {
      // The printer writes int64 literals as int64_t(<32-bit literal>): build -2^63 exactly from
      // factors that fit in 32 bits.
      ExprRef v = op(OpKind::Mul, t, {constant(-2147483648.0, t), constant(1073741824.0, t)});
      return op(OpKind::Mul, t, {v, constant(4, t)});
    }
    case DType::U8: return constant(0, t);
    default: return constant(-INFINITY, t);
  }
}

// What tap r (the reduction index) of the output element's window reads of `x` (slot xs): the
// value, in `acc`, where the tap lies inside the input, and where each window starts.
struct WindowRead {
  std::vector<Axis> axes;
  std::vector<ExprRef> starts;
  ExprRef inside, value;
};

WindowRead read_window(KernelBuilder& b, const AttrMap& attrs, const TensorType& x, int xs, DType acc) {
  WindowRead w;
  // avg_pool has no dilation attribute: axes_of then uses 1.
  const Layout layout = layout_of(attrs, x);
  w.axes = axes_of(b, attrs, layout.spatial_shape(x.shape), kernel_attr(attrs));
  ExprRef unused;
  std::vector<ExprRef> taps = split_taps(w.axes, unused);
  std::vector<ExprRef> positions;
  for (size_t i = 0; i < w.axes.size(); ++i) {
    const Axis& a = w.axes[i];
    ExprRef start = isub(imul(coord(layout.spatial(i)), iconst(a.stride)), iconst(a.pad));
    w.starts.push_back(start);
    ExprRef pos = iadd(start, imul(taps[i], iconst(a.dilation)));
    w.inside = land(w.inside, in_range(pos, a.size));
    positions.push_back(clamp_index(pos, a.size));
  }
  std::vector<ExprRef> xc = layout.coords(coord(0), coord(layout.channel()), positions);
  w.value = cast(load(xs, x.dtype, strided_offset(b, xc, x.shape)), acc);
  return w;
}

// max_pool and avg_pool: one Reduce over the kh*kw taps of each output element's window.
LoweredKernel pool(OpKind kind, const AttrMap& attrs, const TensorType& x, const TensorType& out,
                   int origin) {
  KernelBuilder b(kernel_name(kind, out.dtype, out.rank()), KernelKind::Reduce, out.shape);
  int xs = b.add_buffer(x.dtype, false);
  int os = b.add_buffer(out.dtype, true);
  DType acc = accumulate_in(out.dtype);
  const WindowRead w = read_window(b, attrs, x, xs, acc);
  const SymInt taps = numel(kernel_attr(attrs));
  if (kind == OpKind::MaxPool) {
    ExprRef body = select(w.inside, w.value, lowest(acc));
    return finish_reduce(b, OpKind::ReduceMax, acc, taps, body, os, out.dtype, accumulator(acc), origin);
  }
  // Divisor: the window clipped to the padded input (count_include_pad) or to the input itself;
  // with ceil_mode a window may hang past the end padding, and that part never counts.
  const bool include_pad = attrs.get_bool("count_include_pad");
  ExprRef count = iconst(1);
  for (size_t i = 0; i < w.axes.size(); ++i) {
    const Axis& a = w.axes[i];
    ExprRef end = iadd(w.starts[i], a.kernel);
    ExprRef extent = include_pad
                         ? isub(imin(end, iadd(a.size, iconst(a.pad_end))), w.starts[i])
                         : isub(imin(end, a.size), imax(w.starts[i], iconst(0)));
    count = imul(count, extent);
  }
  count = imax(count, iconst(1));
  ExprRef body = select(w.inside, w.value, constant(0, acc));
  ExprRef result = fdiv(accumulator(acc), cast(count, acc), acc);
  return finish_reduce(b, OpKind::Sum, acc, taps, body, os, out.dtype, result, origin);
}

// max_pool's gradient in two kernels. The first finds, per output element, the tap holding its
// window's maximum: an argmax over the taps as max_pool scans them (the first maximum wins, padding
// counts as -inf, a NaN wins). The second sums, per input element, the output gradient of each
// window whose winning tap reads it. Along a spatial dim, input position i lies at offset
// t = i + pad - o * stride of window o; the windows holding it are the last ceil(extent / stride)
// that start at or before i + pad, and it is a tap where t is a multiple of the dilation.
LoweredOp max_pool_grad(const AttrMap& attrs, const TensorType& x, const TensorType& g, const TensorType& dx,
                        int origin) {
  const DType acc = accumulate_in(dx.dtype);
  const std::vector<int64_t> kernel = attrs.get_ints("kernel");
  LoweredOp lowered;
  lowered.temps.push_back({DType::I32, g.shape});  // the winning tap of each window
  {
    KernelBuilder b(kernel_name(OpKind::MaxPoolGrad, x.dtype, x.rank()) + "_argmax", KernelKind::Reduce, g.shape);
    int xs = b.add_buffer(x.dtype, false);
    int ws = b.add_buffer(DType::I32, true);
    const WindowRead w = read_window(b, attrs, x, xs, acc);
    ExprRef body = select(w.inside, w.value, lowest(acc));
    lowered.steps.push_back({finish_reduce(b, OpKind::ArgMax, DType::I32, numel(kernel_attr(attrs)), body, ws,
                                           DType::I32, accumulator(DType::I32), origin),
                             {0, 3}});
  }
  KernelBuilder b(kernel_name(OpKind::MaxPoolGrad, dx.dtype, dx.rank()), KernelKind::Reduce, dx.shape);
  int gs = b.add_buffer(g.dtype, false);
  int ws = b.add_buffer(DType::I32, false);
  int os = b.add_buffer(dx.dtype, true);
  const std::vector<Axis> axes = axes_of(b, attrs, Shape(x.shape.begin() + 2, x.shape.end()), kernel_attr(attrs));
  std::vector<int64_t> extents, windows_per_dim;  // a window's extent; the windows one input position lies in
  int64_t candidates = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    extents.push_back(axes[i].dilation * (kernel[i] - 1) + 1);
    windows_per_dim.push_back((extents[i] + axes[i].stride - 1) / axes[i].stride);
    candidates *= windows_per_dim.back();
  }
  // The reduction index picks one candidate window per dim, row-major, windows in increasing order
  // (the order the reference adds them in).
  std::vector<ExprRef> pick(axes.size());
  ExprRef rest = reduction_index();
  for (size_t i = axes.size(); i-- > 0;) {
    pick[i] = imod(rest, iconst(windows_per_dim[i]));
    rest = idiv(rest, iconst(windows_per_dim[i]));
  }
  std::vector<ExprRef> window = {coord(0), coord(1)};
  ExprRef hit, tap = iconst(0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis& a = axes[i];
    ExprRef windows = b.param_for(g.shape[2 + i]);
    ExprRef reach = iadd(coord(int(2 + i)), iconst(a.pad));  // >= 0
    ExprRef o = iadd(isub(idiv(reach, iconst(a.stride)), iconst(windows_per_dim[i] - 1)), pick[i]);
    ExprRef offset = isub(reach, imul(o, iconst(a.stride)));
    ExprRef ok = land(land(ige(o, iconst(0)), ilt(o, windows)),
                      ilt(offset, iconst(extents[i])));
    if (a.dilation != 1) ok = land(ok, ieq(imod(offset, iconst(a.dilation)), iconst(0)));
    hit = land(hit, ok);
    tap = iadd(imul(tap, iconst(kernel[i])), idiv(offset, iconst(a.dilation)));
    window.push_back(imax(imin(o, isub(windows, iconst(1))), iconst(0)));
  }
  ExprRef at = strided_offset(b, window, g.shape);
  ExprRef won = land(hit, ieq(load(ws, DType::I32, at), tap));
  ExprRef body = select(won, cast(load(gs, g.dtype, at), acc), constant(0, acc));
  lowered.steps.push_back(
      {finish_reduce(b, OpKind::Sum, acc, SymInt(candidates), body, os, dx.dtype, accumulator(acc), origin),
       {1, 3, 2}});
  return lowered;
}

// Mean over every spatial element of each (n, c) plane; the output's linear index is the plane.
LoweredKernel global_avg_pool(const TensorType& x, const TensorType& out, int origin) {
  KernelBuilder b(kernel_name(OpKind::GlobalAvgPool, out.dtype, out.rank()), KernelKind::Reduce,
                  out.shape);
  int xs = b.add_buffer(x.dtype, false);
  int os = b.add_buffer(out.dtype, true);
  SymInt size = product(x.shape, 2, x.rank());
  ExprRef s = b.param_for(size);
  DType acc = accumulate_in(out.dtype);
  ExprRef body = cast(load(xs, x.dtype, iadd(imul(linear_index(), s), reduction_index())), acc);
  ExprRef result = fdiv(accumulator(acc), cast(s, acc), acc);
  return finish_reduce(b, OpKind::Sum, acc, size, body, os, out.dtype, result, origin);
}

}  // namespace

LoweredOp lower_conv(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                     const std::vector<TensorType>& outputs, int origin) {
  const TensorType& out = outputs.at(0);
  LoweredOp lowered;
  std::vector<int> binding;
  for (size_t i = 0; i <= inputs.size(); ++i) binding.push_back(int(i));
  switch (kind) {
    case OpKind::Conv:
      lowered.steps.push_back({conv(attrs, inputs, out, origin), binding});
      return lowered;
    case OpKind::ConvTranspose:
      lowered.steps.push_back({conv_transpose(attrs, inputs, out, origin), binding});
      return lowered;
    case OpKind::ConvWeightGrad:
      lowered.steps.push_back({conv_weight_grad(attrs, inputs, out, origin), binding});
      return lowered;
    case OpKind::MaxPool: case OpKind::AvgPool:
      lowered.steps.push_back({pool(kind, attrs, inputs.at(0), out, origin), binding});
      return lowered;
    case OpKind::GlobalAvgPool:
      lowered.steps.push_back({global_avg_pool(inputs.at(0), out, origin), binding});
      return lowered;
    case OpKind::MaxPoolGrad:
      return max_pool_grad(attrs, inputs.at(0), inputs.at(1), out, origin);
    case OpKind::WinogradWeights: case OpKind::WinogradInput: case OpKind::WinogradOutput:
      return lower_winograd(kind, attrs, inputs, out, origin);
    default:
      throw Error("op '" + std::string(op_name(kind)) + "' is not a conv op");
  }
}

}  // namespace kiln::kernel
