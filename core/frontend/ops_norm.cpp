// Op functions of the norm family (declared in ops.h). The ops take weight and bias as trailing
// optional inputs, so a bias without a weight gets a weight of ones.
#include "core/frontend/dispatch.h"
#include "core/frontend/factories.h"
#include "core/frontend/ops.h"

namespace kiln {
namespace {

// Appends the optional affine parameters in the op's input order.
void add_affine(std::vector<Tensor>& inputs, const Tensor& weight, const Tensor& bias,
                const Tensor& x, const Loc& loc) {
  if (!weight.defined() && !bias.defined()) return;
  inputs.push_back(weight.defined() ? weight : ones(bias.shape(), bias.dtype(), x.device(), loc));
  if (bias.defined()) inputs.push_back(bias);
}

std::string shape_list(const std::vector<int64_t>& dims) { return shape_str(make_shape(dims)); }

}  // namespace

Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                  const Tensor& weight, const Tensor& bias, double eps, Loc loc) {
  if (!x.defined()) throw Error("layer_norm: x is an undefined Tensor at " + short_location(loc));
  const int64_t rank = x.dim(), n = int64_t(normalized_shape.size());
  bool matches = n > 0 && n <= rank;
  for (int64_t i = 0; matches && i < n; ++i)
    matches = x.shape()[size_t(rank - n + i)] == normalized_shape[size_t(i)];
  if (!matches)
    throw Error("layer_norm: normalized_shape " + shape_list(normalized_shape) +
                " must be non-empty and equal the trailing dims of x " + x.type().str() + " at " +
                short_location(loc));
  std::vector<Tensor> inputs{x};
  add_affine(inputs, weight, bias, x, loc);
  return run_op1(OpKind::LayerNorm, inputs, {{"axis", rank - n}, {"eps", eps}}, loc);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, double eps, Loc loc) {
  std::vector<Tensor> inputs{x, running_mean, running_var};
  add_affine(inputs, weight, bias, x, loc);
  return run_op1(OpKind::BatchNorm, inputs, {{"eps", eps}}, loc);
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps, Loc loc) {
  std::vector<Tensor> inputs{x};
  add_affine(inputs, weight, bias, x, loc);
  return run_op1(OpKind::GroupNorm, inputs, {{"num_groups", num_groups}, {"eps", eps}}, loc);
}

}  // namespace kiln
