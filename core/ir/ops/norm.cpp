// Shape and dtype rules of the norm ops: layer_norm, inference batch_norm, group_norm.
#include "core/ir/op.h"
#include "core/ir/ops/define_op.h"

namespace kiln::ops {
namespace {

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

void check_float_input(const InferContext& ctx) {
  DType t = ctx.input(0).dtype;
  if (!is_floating(t))
    ctx.fail("needs a floating-point input, got " + std::string(dtype_name(t)) + "; cast it first");
}

// Parameters (weight, bias, running stats) must be floating and shaped `want`; their float type
// may differ from x's (bf16 activations with f32 weights are common).
void check_param(const InferContext& ctx, size_t i, const char* what, const Shape& want) {
  if (i >= ctx.num_inputs()) return;
  const TensorType& p = ctx.input(i);
  if (!is_floating(p.dtype))
    ctx.fail(std::string(what) + " must be floating-point, got " + p.str());
  if (!same_shape(p.shape, want))
    ctx.fail(std::string(what) + " has shape " + shape_str(p.shape) + ", expected " +
             shape_str(want));
}

void check_channels_input(const InferContext& ctx) {
  check_float_input(ctx);
  if (ctx.input(0).rank() < 2)
    ctx.fail("expects an input [N, C, ...] of rank >= 2, got rank " +
             std::to_string(ctx.input(0).rank()));
}

std::vector<TensorType> layer_norm_rule(const InferContext& ctx) {
  check_float_input(ctx);
  const TensorType& x = ctx.input(0);
  int64_t rank = int64_t(x.rank());
  int64_t axis = ctx.attrs().get_int("axis");
  if (rank == 0 || axis < -rank || axis >= rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for a " + std::to_string(rank) +
             "-d input; the normalized dims x.shape[axis:] must be non-empty");
  if (axis < 0) axis += rank;
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  check_param(ctx, 2, "bias", normalized);  // first: a missing weight is filled from its shape
  check_param(ctx, 1, "weight", normalized);
  return {x};
}

std::vector<TensorType> batch_norm_rule(const InferContext& ctx) {
  check_channels_input(ctx);
  const TensorType& x = ctx.input(0);
  Shape channels = {x.shape[1]};
  check_param(ctx, 1, "running_mean", channels);
  check_param(ctx, 2, "running_var", channels);
  check_param(ctx, 4, "bias", channels);  // first: a missing weight is filled from its shape
  check_param(ctx, 3, "weight", channels);
  return {x};
}

std::vector<TensorType> group_norm_rule(const InferContext& ctx) {
  check_channels_input(ctx);
  const TensorType& x = ctx.input(0);
  int64_t groups = ctx.attrs().get_int("num_groups");
  if (groups <= 0) ctx.fail("num_groups must be positive, got " + std::to_string(groups));
  if (x.shape[1] % SymInt(groups) != 0)
    ctx.fail("num_groups " + std::to_string(groups) + " does not divide the " +
             x.shape[1].str() + " channels");
  Shape channels = {x.shape[1]};
  check_param(ctx, 2, "bias", channels);  // first: a missing weight is filled from its shape
  check_param(ctx, 1, "weight", channels);
  return {x};
}

}  // namespace

void define_norm(std::vector<OpDef>& t) {
  const AttrSpec eps{"eps", AttrType::Float, 1e-5};
  // Inputs: x, then optional weight and bias (a bias needs a weight before it).
  t.push_back(define_op(OpKind::LayerNorm, {{"axis", AttrType::Int, std::nullopt}, eps}, 1, 3, layer_norm_rule));
  // Inputs: x, running_mean, running_var, then optional weight and bias.
  t.push_back(define_op(OpKind::BatchNorm, {eps}, 3, 5, batch_norm_rule));
  // Inputs: x, then optional weight and bias.
  t.push_back(define_op(OpKind::GroupNorm, {{"num_groups", AttrType::Int, std::nullopt}, eps}, 1, 3, group_norm_rule));
}

}  // namespace kiln::ops
