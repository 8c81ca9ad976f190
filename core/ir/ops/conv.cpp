// Shape and dtype rules of the conv ops: conv, conv_transpose, max_pool, avg_pool, global_avg_pool,
// and the gradients a training step's backward runs: max_pool_grad (max_pool's) and
// conv_weight_grad (conv's, for its weight; its input's is a conv_transpose).
// Layout is channels-first ([N, C, *spatial]) with 1 or 2 spatial dims; conv and the two window
// pools also take channels-last activations ([N, *spatial, C], attribute channels_last), which the
// channels-last pass chooses for backends whose kernels run faster so. Per-spatial attributes
// follow ONNX: padding lists all begins then all ends, and an empty list means the ONNX default
// (stride and dilation 1, padding 0), so an importer can pass attributes through unchanged.
#include "core/ir/op.h"
#include "core/ir/ops/define_op.h"

namespace kiln::ops {
namespace {

// The attribute `name` with one value per spatial dim (times `per_dim`); empty means all `fill`.
std::vector<int64_t> spatial_attr(const InferContext& ctx, const std::string& name, size_t spatial,
                                  size_t per_dim, int64_t fill, int64_t min_value) {
  std::vector<int64_t> v = ctx.attrs().get_ints(name);
  if (v.empty()) v.assign(spatial * per_dim, fill);
  if (v.size() != spatial * per_dim)
    ctx.fail("attribute '" + name + "' needs " + std::to_string(spatial * per_dim) + " values (" +
             (per_dim == 2 ? "all begins then all ends" : "one per spatial dim") + "), got " +
             std::to_string(v.size()));
  for (int64_t x : v)
    if (x < min_value)
      ctx.fail("attribute '" + name + "' values must be >= " + std::to_string(min_value) +
               ", got " + std::to_string(x));
  return v;
}

// Rank 3 ([N, C, W]) or 4 ([N, C, H, W]); returns the number of spatial dims.
size_t spatial_rank(const InferContext& ctx, const TensorType& x) {
  if (x.rank() != 3 && x.rank() != 4)
    ctx.fail("input must be [N, C, W] or [N, C, H, W], got " + x.str());
  return x.rank() - 2;
}

void require_float(const InferContext& ctx) {
  for (const TensorType& t : ctx.inputs()) {
    if (!is_floating(t.dtype))
      ctx.fail("needs floating-point operands, got " + std::string(dtype_name(t.dtype)) +
               "; cast first");
    if (t.dtype != ctx.input(0).dtype)
      ctx.fail("operand dtypes must match, got " + std::string(dtype_name(ctx.input(0).dtype)) +
               " and " + std::string(dtype_name(t.dtype)));
  }
}

void check_bias(const InferContext& ctx, const SymInt& out_channels) {
  if (ctx.num_inputs() < 3) return;
  const TensorType& bias = ctx.input(2);
  if (bias.rank() != 1 || bias.shape[0] != out_channels)
    ctx.fail("bias must be 1-d with " + out_channels.str() + " elements, got " + bias.str());
}

int64_t groups_attr(const InferContext& ctx) {
  const int64_t groups = ctx.attrs().get_int("groups");
  if (groups < 1) ctx.fail("groups must be >= 1, got " + std::to_string(groups));
  return groups;
}

// The activation input as the rules read it, channels-first, and the result in the op's layout.
TensorType activation(const InferContext& ctx) {
  TensorType x = ctx.input(0);
  if (is_channels_last(ctx.attrs())) x.shape = channels_first_dims(x.shape);
  return x;
}
std::vector<TensorType> in_layout(const InferContext& ctx, TensorType result) {
  if (is_channels_last(ctx.attrs())) result.shape = channels_last_dims(result.shape);
  return {result};
}

std::vector<TensorType> conv_rule(const InferContext& ctx) {
  require_float(ctx);
  const TensorType x = activation(ctx);
  const TensorType& w = ctx.input(1);
  const size_t spatial = spatial_rank(ctx, x);
  if (w.rank() != x.rank())
    ctx.fail("weight " + w.str() + " must have the input's rank " + std::to_string(x.rank()) +
             ": [out_channels, in_channels / groups, *kernel]");
  const auto stride = spatial_attr(ctx, "stride", spatial, 1, 1, 1);
  const auto pads = spatial_attr(ctx, "padding", spatial, 2, 0, 0);
  const auto dilation = spatial_attr(ctx, "dilation", spatial, 1, 1, 1);
  const int64_t groups = groups_attr(ctx);
  const SymInt& channels = x.shape[1];
  const SymInt& out_channels = w.shape[0];
  if (channels % groups != 0 || out_channels % groups != 0)
    ctx.fail("groups " + std::to_string(groups) + " must divide both the input channels (" +
             channels.str() + ") and the output channels (" + out_channels.str() + ")");
  if (w.shape[1] * groups != channels)
    ctx.fail("channel mismatch: input " + x.str() + " has " + channels.str() +
             " channels but weight " + w.str() + " with groups " + std::to_string(groups) +
             " expects " + (w.shape[1] * groups).str());
  check_bias(ctx, out_channels);
  Shape out = {x.shape[0], out_channels};
  for (size_t i = 0; i < spatial; ++i) {
    const SymInt padded = x.shape[2 + i] + pads[i] + pads[spatial + i];
    const SymInt extent = w.shape[2 + i] * dilation[i] - (dilation[i] - 1);  // dilated kernel
    if (padded < extent)
      ctx.fail("kernel " + shape_str(Shape(w.shape.begin() + 2, w.shape.end())) +
               " (dilated extent " + extent.str() + ") is larger than the padded input extent " +
               padded.str() + " of " + x.str() + " in spatial dim " + std::to_string(i));
    out.push_back((padded - extent) / stride[i] + 1);
  }
  return in_layout(ctx, {x.dtype, out});
}

std::vector<TensorType> conv_transpose_rule(const InferContext& ctx) {
  require_float(ctx);
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  const size_t spatial = spatial_rank(ctx, x);
  if (w.rank() != x.rank())
    ctx.fail("weight " + w.str() + " must have the input's rank " + std::to_string(x.rank()) +
             ": [in_channels, out_channels / groups, *kernel]");
  const auto stride = spatial_attr(ctx, "stride", spatial, 1, 1, 1);
  const auto pads = spatial_attr(ctx, "padding", spatial, 2, 0, 0);
  const auto output_padding = spatial_attr(ctx, "output_padding", spatial, 1, 0, 0);
  const auto dilation = spatial_attr(ctx, "dilation", spatial, 1, 1, 1);
  const int64_t groups = groups_attr(ctx);
  const SymInt& channels = x.shape[1];
  if (channels % groups != 0)
    ctx.fail("groups " + std::to_string(groups) + " must divide the input channels (" +
             channels.str() + ")");
  if (w.shape[0] != channels)
    ctx.fail("channel mismatch: input " + x.str() + " has " + channels.str() +
             " channels but weight " + w.str() + " has " + w.shape[0].str());
  const SymInt out_channels = w.shape[1] * groups;
  check_bias(ctx, out_channels);
  Shape out = {x.shape[0], out_channels};
  for (size_t i = 0; i < spatial; ++i) {
    // Extra rows beyond a full stride (or dilation) would lie outside every window.
    if (output_padding[i] >= std::max(stride[i], dilation[i]))
      ctx.fail("output_padding " + std::to_string(output_padding[i]) +
               " must be smaller than the stride or the dilation in spatial dim " +
               std::to_string(i));
    const SymInt size = (x.shape[2 + i] - 1) * stride[i] - pads[i] - pads[spatial + i] +
                        (w.shape[2 + i] - 1) * dilation[i] + output_padding[i] + 1;
    if (size < 1)
      ctx.fail("output size " + size.str() + " in spatial dim " + std::to_string(i) +
               " is less than 1; reduce the padding");
    out.push_back(size);
  }
  return {{x.dtype, out}};
}

std::vector<TensorType> pool_rule(const InferContext& ctx) {
  const TensorType x = activation(ctx);
  const bool is_max = ctx.kind() == OpKind::MaxPool || ctx.kind() == OpKind::MaxPoolGrad;
  if (x.dtype == DType::Bool || (!is_max && !is_floating(x.dtype)))
    ctx.fail("needs a " + std::string(is_max ? "numeric" : "floating-point") + " input, got " +
             std::string(dtype_name(x.dtype)));
  const size_t spatial = spatial_rank(ctx, x);
  if (ctx.attrs().get_ints("kernel").empty()) ctx.fail("attribute 'kernel' must not be empty");
  const auto kernel = spatial_attr(ctx, "kernel", spatial, 1, 0, 1);
  const auto stride = spatial_attr(ctx, "stride", spatial, 1, 1, 1);
  const auto pads = spatial_attr(ctx, "padding", spatial, 2, 0, 0);
  const auto dilation =
      is_max ? spatial_attr(ctx, "dilation", spatial, 1, 1, 1) : std::vector<int64_t>(spatial, 1);
  const bool ceil_mode = ctx.attrs().get_bool("ceil_mode");
  Shape out = {x.shape[0], x.shape[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t extent = dilation[i] * (kernel[i] - 1) + 1;
    // A window lying wholly in padding would have nothing to pool (PyTorch's rule).
    if (pads[i] > extent / 2 || pads[spatial + i] > extent / 2)
      ctx.fail("padding (" + std::to_string(pads[i]) + ", " + std::to_string(pads[spatial + i]) +
               ") must be at most half the kernel extent " + std::to_string(extent) +
               " in spatial dim " + std::to_string(i));
    const SymInt padded = x.shape[2 + i] + pads[i] + pads[spatial + i];
    if (padded < extent)
      ctx.fail("kernel extent " + std::to_string(extent) + " is larger than the padded input " +
               "extent " + padded.str() + " of " + x.str() + " in spatial dim " +
               std::to_string(i));
    SymInt size = (padded - extent + (ceil_mode ? stride[i] - 1 : 0)) / stride[i] + 1;
    // ceil_mode: the last window must still start inside the input or the begin padding.
    if (ceil_mode && (size - 1) * stride[i] >= x.shape[2 + i] + pads[i]) size = size - 1;
    out.push_back(size);
  }
  return in_layout(ctx, {x.dtype, out});
}

// max_pool_grad(x, g): g has max_pool(x)'s type; the result, x's gradient, has x's.
std::vector<TensorType> max_pool_grad_rule(const InferContext& ctx) {
  require_float(ctx);
  if (is_channels_last(ctx.attrs())) ctx.fail("takes channels-first activations only");
  const TensorType pooled = pool_rule(ctx).at(0);
  const TensorType& g = ctx.input(1);
  if (g.shape != pooled.shape)
    ctx.fail("output gradient " + g.str() + " must have the pooled shape " + pooled.str() + " of input " +
             ctx.input(0).str());
  return {ctx.input(0)};
}

// conv_weight_grad(x, g): the gradient of a conv's weight, for the conv from x (channels-first)
// to g, its output's gradient. The attribute "kernel" gives the weight's spatial sizes; the result
// is [g's channels, x's channels / groups, *kernel]. g may stop short of the conv's output (a
// conv_transpose's weight gradient, whose output padding it lacks), but each of its windows must
// lie inside the padded input.
std::vector<TensorType> conv_weight_grad_rule(const InferContext& ctx) {
  require_float(ctx);
  const TensorType& x = ctx.input(0);
  const TensorType& g = ctx.input(1);
  const size_t spatial = spatial_rank(ctx, x);
  if (g.rank() != x.rank() || g.shape[0] != x.shape[0])
    ctx.fail("output gradient " + g.str() + " must have input " + x.str() + "'s rank and batch");
  if (ctx.attrs().get_ints("kernel").empty()) ctx.fail("attribute 'kernel' must not be empty");
  const auto kernel = spatial_attr(ctx, "kernel", spatial, 1, 0, 1);
  const auto stride = spatial_attr(ctx, "stride", spatial, 1, 1, 1);
  const auto pads = spatial_attr(ctx, "padding", spatial, 2, 0, 0);
  const auto dilation = spatial_attr(ctx, "dilation", spatial, 1, 1, 1);
  const int64_t groups = groups_attr(ctx);
  if (x.shape[1] % groups != 0 || g.shape[1] % groups != 0)
    ctx.fail("groups " + std::to_string(groups) + " must divide both the input channels (" + x.shape[1].str() +
             ") and the output gradient's (" + g.shape[1].str() + ")");
  Shape out = {g.shape[1], x.shape[1] / SymInt(groups)};
  for (size_t i = 0; i < spatial; ++i) {
    const SymInt padded = x.shape[2 + i] + pads[i] + pads[spatial + i];
    const SymInt reach = (g.shape[2 + i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1;
    if (padded < reach)
      ctx.fail("the windows of output gradient " + g.str() + " reach " + reach.str() + " past the padded input extent " +
               padded.str() + " of " + x.str() + " in spatial dim " + std::to_string(i));
    out.push_back(SymInt(kernel[i]));
  }
  return {{x.dtype, out}};
}

std::vector<TensorType> global_avg_pool_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (!is_floating(x.dtype))
    ctx.fail("needs a floating-point input, got " + std::string(dtype_name(x.dtype)));
  if (x.rank() < 3)
    ctx.fail("input must be [N, C, *spatial] with at least one spatial dim, got " + x.str());
  Shape out = x.shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  return {{x.dtype, out}};
}

}  // namespace

void define_conv(std::vector<OpDef>& t) {
  using Ints = std::vector<int64_t>;
  const AttrSpec stride{"stride", AttrType::Ints, Ints{}};
  const AttrSpec padding{"padding", AttrType::Ints, Ints{}};
  const AttrSpec dilation{"dilation", AttrType::Ints, Ints{}};
  const AttrSpec groups{"groups", AttrType::Int, int64_t(1)};
  const AttrSpec ceil_mode{"ceil_mode", AttrType::Bool, false};
  const AttrSpec channels_last{"channels_last", AttrType::Bool, false};
  // Inputs: x, weight, optional bias.
  t.push_back(define_op(OpKind::Conv, {stride, padding, dilation, groups, channels_last}, 2, 3, conv_rule));
  t.push_back(define_op(OpKind::ConvTranspose,
                        {stride, padding, {"output_padding", AttrType::Ints, Ints{}}, dilation, groups}, 2, 3,
                        conv_transpose_rule));
  const AttrSpec kernel{"kernel", AttrType::Ints, std::nullopt};
  t.push_back(
      define_op(OpKind::MaxPool, {kernel, stride, padding, dilation, ceil_mode, channels_last}, 1, 1, pool_rule));
  // count_include_pad defaults to ONNX's false; the PyTorch-style avg_pool2d passes true.
  t.push_back(define_op(OpKind::AvgPool,
                        {kernel, stride, padding, ceil_mode, {"count_include_pad", AttrType::Bool, false},
                         channels_last},
                        1, 1, pool_rule));
  t.push_back(define_op(OpKind::GlobalAvgPool, {}, 1, 1, global_avg_pool_rule));
  // Inputs: x, the gradient of max_pool(x); the attributes are the max_pool's.
  t.push_back(define_op(OpKind::MaxPoolGrad, {kernel, stride, padding, dilation, ceil_mode, channels_last}, 2, 2,
                        max_pool_grad_rule));
  // Inputs: x, the gradient of conv(x, weight); the attributes are the conv's and the weight's
  // spatial sizes.
  t.push_back(
      define_op(OpKind::ConvWeightGrad, {kernel, stride, padding, dilation, groups}, 2, 2, conv_weight_grad_rule));
}

}  // namespace kiln::ops

namespace kiln {

bool is_channels_last(const AttrMap& attrs) { return attrs.has("channels_last") && attrs.get_bool("channels_last"); }

}  // namespace kiln
