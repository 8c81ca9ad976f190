// Op functions of the reduce family (declared in ops.h): reductions over dims, argmax/argmin,
// softmax and log_softmax.
#include "core/frontend/dispatch.h"
#include "core/frontend/ops.h"

namespace kiln {
namespace {

Tensor reduce_dims(OpKind kind, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                   const Loc& loc) {
  return run_op1(kind, {x}, {{"dims", dims}, {"keepdim", keepdim}}, loc);
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::Sum, x, dims, keepdim, loc);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::Mean, x, dims, keepdim, loc);
}
Tensor prod(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::Prod, x, dims, keepdim, loc);
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::ReduceMax, x, dims, keepdim, loc);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::ReduceMin, x, dims, keepdim, loc);
}
Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::ReduceMax, x, dims, keepdim, loc);
}
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::ReduceMin, x, dims, keepdim, loc);
}
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, Loc loc) {
  return reduce_dims(OpKind::LogSumExp, x, dims, keepdim, loc);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim, Loc loc) {
  return run_op1(OpKind::ArgMax, {x}, {{"dim", dim}, {"keepdim", keepdim}}, loc);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim, Loc loc) {
  return run_op1(OpKind::ArgMin, {x}, {{"dim", dim}, {"keepdim", keepdim}}, loc);
}

Tensor softmax(const Tensor& x, int64_t dim, Loc loc) {
  return run_op1(OpKind::Softmax, {x}, {{"dim", dim}}, loc);
}
Tensor log_softmax(const Tensor& x, int64_t dim, Loc loc) {
  return run_op1(OpKind::LogSoftmax, {x}, {{"dim", dim}}, loc);
}

}  // namespace kiln
