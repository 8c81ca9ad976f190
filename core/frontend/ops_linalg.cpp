// Op functions of the linalg family (declared in ops.h): matmul, gemm, linear.
#include "core/frontend/dispatch.h"
#include "core/frontend/ops.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b, Loc loc) {
  return run_op1(OpKind::MatMul, {a, b}, {}, loc);
}

Tensor gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta,
            bool trans_a, bool trans_b, Loc loc) {
  std::vector<Tensor> inputs = {a, b};
  if (c.defined()) inputs.push_back(c);  // an absent C is the op's optional third input
  return run_op1(OpKind::Gemm, inputs,
                 {{"alpha", alpha}, {"beta", beta}, {"trans_a", trans_a}, {"trans_b", trans_b}},
                 loc);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Loc loc) {
  std::vector<Tensor> inputs = {x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return run_op1(OpKind::Linear, inputs, {}, loc);
}

}  // namespace kiln
