// Gradient rules of the norm ops. layer_norm and group_norm recompute x̂ = (x - mean) / σ and give
// dx = (dx̂ - mean(dx̂) - x̂ mean(dx̂ x̂)) / σ over the normalized elements. batch_norm takes its
// mean and variance as inputs, so its rule gives their gradients too: a training batch norm, whose
// statistics are computed from x in the graph, gets torch's full gradient by the chain rule.
#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

std::vector<int64_t> dims_between(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t d = from; d < to; ++d) v.push_back(d);
  return v;
}

// A parameter given in the input's float type (norm parameters may be f32 under bf16 activations).
Value* param(G& b, size_t i, const Shape& shape) { return b.reshape(b.cast_to(b.input(i), b.input(0)->type.dtype), shape); }
bool has_input(const G& b, size_t i) { return b.node().inputs.size() > i; }
Value* sum_over(G& b, Value* v, const std::vector<int64_t>& dims) { return dims.empty() ? v : b.sum(v, dims, false); }

// The normalized value x̂ over `dims` of x (keeping them) and 1/σ.
struct Normalized {
  Value* xhat;
  Value* rstd;
};

Normalized normalize(G& b, Value* x, const std::vector<int64_t>& dims, double eps) {
  Value* centered = b.op(K::Sub, {x, b.mean(x, dims, true)});
  Value* var = b.mean(b.op(K::Mul, {centered, centered}), dims, true);
  Value* rstd = b.op(K::Rsqrt, {b.op(K::Add, {var, b.scalar(eps, x->type.dtype)})});
  return {b.op(K::Mul, {centered, rstd}), rstd};
}

// dx from dx̂ over `dims`: (dx̂ - mean(dx̂) - x̂ mean(dx̂ x̂)) / σ.
Value* input_grad(G& b, Value* dxhat, const Normalized& n, const std::vector<int64_t>& dims) {
  Value* mean_d = b.mean(dxhat, dims, true);
  Value* mean_dx = b.mean(b.op(K::Mul, {dxhat, n.xhat}), dims, true);
  Value* inner = b.op(K::Sub, {b.op(K::Sub, {dxhat, mean_d}), b.op(K::Mul, {n.xhat, mean_dx})});
  return b.op(K::Mul, {inner, n.rstd});
}

std::vector<Value*> layer_norm_grad(G& b) {
  Value* x = b.input(0);
  const int64_t rank = int64_t(x->type.rank());
  int64_t axis = b.attrs().get_int("axis");
  if (axis < 0) axis += rank;
  const std::vector<int64_t> normalized = dims_between(axis, rank), lead = dims_between(0, axis);
  const Shape param_shape(x->type.shape.begin() + axis, x->type.shape.end());
  const Normalized n = normalize(b, x, normalized, b.attrs().get_float("eps"));
  Value* g = b.grad();
  std::vector<Value*> out(b.node().inputs.size(), nullptr);
  if (b.wanted(0)) {
    Value* dxhat = has_input(b, 1) ? b.op(K::Mul, {g, param(b, 1, param_shape)}) : g;
    out[0] = input_grad(b, dxhat, n, normalized);
  }
  if (has_input(b, 1) && b.wanted(1))
    out[1] = b.cast_to(sum_over(b, b.op(K::Mul, {g, n.xhat}), lead), b.input(1)->type.dtype);
  if (has_input(b, 2) && b.wanted(2)) out[2] = b.cast_to(sum_over(b, g, lead), b.input(2)->type.dtype);
  return out;
}

// The per-channel shape [C, 1, ...] that broadcasts against [N, C, *spatial].
Shape channel_shape(const Value* x) {
  Shape s = {x->type.shape[1]};
  for (size_t i = 2; i < x->type.rank(); ++i) s.push_back(1);
  return s;
}

// Every dim but the channels: what per-channel parameters' gradients sum over.
std::vector<int64_t> all_but_channels(const Value* x) {
  std::vector<int64_t> dims = {0};
  for (size_t i = 2; i < x->type.rank(); ++i) dims.push_back(int64_t(i));
  return dims;
}

std::vector<Value*> group_norm_grad(G& b) {
  Value* x = b.input(0);
  const int64_t groups = b.attrs().get_int("num_groups");
  const Shape grouped = {x->type.shape[0], SymInt(groups), SymInt(-1)};
  const Normalized n = normalize(b, b.reshape(x, grouped), {2}, b.attrs().get_float("eps"));
  Value* xhat = b.reshape(n.xhat, x->type.shape);
  Value* g = b.grad();
  std::vector<Value*> out(b.node().inputs.size(), nullptr);
  if (b.wanted(0)) {
    Value* dxhat = has_input(b, 1) ? b.op(K::Mul, {g, param(b, 1, channel_shape(x))}) : g;
    out[0] = b.reshape(input_grad(b, b.reshape(dxhat, grouped), n, {2}), x->type.shape);
  }
  const std::vector<int64_t> reduce = all_but_channels(x);
  if (has_input(b, 1) && b.wanted(1))
    out[1] = b.cast_to(b.sum(b.op(K::Mul, {g, xhat}), reduce, false), b.input(1)->type.dtype);
  if (has_input(b, 2) && b.wanted(2)) out[2] = b.cast_to(b.sum(g, reduce, false), b.input(2)->type.dtype);
  return out;
}

// y = (x - mean) / sqrt(var + eps) * weight + bias, per channel; inputs x, mean, var, weight, bias.
std::vector<Value*> batch_norm_grad(G& b) {
  Value* x = b.input(0);
  const DType dtype = x->type.dtype;
  const Shape per_channel = channel_shape(x);
  const std::vector<int64_t> reduce = all_but_channels(x);
  Value* g = b.grad();
  Value* centered = b.op(K::Sub, {x, param(b, 1, per_channel)});
  Value* var = b.cast_to(b.input(2), dtype);  // [C]
  Value* rstd = b.op(K::Rsqrt, {b.op(K::Add, {var, b.scalar(b.attrs().get_float("eps"), dtype)})});
  Value* weight = has_input(b, 3) ? b.cast_to(b.input(3), dtype) : nullptr;
  Value* scale = weight ? b.op(K::Mul, {rstd, weight}) : rstd;  // [C]: dy/dx
  Value* sum_g = nullptr;
  auto summed_g = [&] { return sum_g ? sum_g : sum_g = b.sum(g, reduce, false); };
  Value* sum_gc = (b.wanted(2) || (has_input(b, 3) && b.wanted(3))) ? b.sum(b.op(K::Mul, {g, centered}), reduce, false) : nullptr;
  std::vector<Value*> out(b.node().inputs.size(), nullptr);
  if (b.wanted(0)) out[0] = b.op(K::Mul, {g, b.reshape(scale, per_channel)});
  if (b.wanted(1)) out[1] = b.cast_to(b.op(K::Neg, {b.op(K::Mul, {summed_g(), scale})}), b.input(1)->type.dtype);
  if (b.wanted(2)) {  // d/dvar (var + eps)^-1/2 = -rstd^3 / 2
    Value* rstd3 = b.op(K::Mul, {rstd, b.op(K::Mul, {rstd, rstd})});
    Value* d = b.op(K::Mul, {b.op(K::Mul, {sum_gc, rstd3}), b.scalar(-0.5, dtype)});
    out[2] = b.cast_to(weight ? b.op(K::Mul, {d, weight}) : d, b.input(2)->type.dtype);
  }
  if (has_input(b, 3) && b.wanted(3)) out[3] = b.cast_to(b.op(K::Mul, {sum_gc, rstd}), b.input(3)->type.dtype);
  if (has_input(b, 4) && b.wanted(4)) out[4] = b.cast_to(summed_g(), b.input(4)->type.dtype);
  return out;
}

}  // namespace

void define_norm_grads(std::vector<OpDef>& t) {
  set_rule(t, K::LayerNorm, layer_norm_grad);
  set_rule(t, K::GroupNorm, group_norm_grad);
  set_rule(t, K::BatchNorm, batch_norm_grad);
}

}  // namespace kiln::ops
