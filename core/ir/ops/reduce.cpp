// Shape and dtype rules of the reduce ops: dims reductions, argmax/argmin, softmax/log_softmax.
#include <algorithm>

#include "core/ir/op.h"
#include "core/ir/ops/define_op.h"

namespace kiln::ops {
namespace {

std::string dtype_str(DType t) { return std::string(dtype_name(t)); }

bool needs_float(OpKind k) {
  return k == OpKind::Mean || k == OpKind::LogSumExp || k == OpKind::Softmax ||
         k == OpKind::LogSoftmax;
}

void check_dtype(const InferContext& ctx) {
  DType t = ctx.input(0).dtype;
  if (!needs_float(ctx.kind()) || is_floating(t)) return;
  ctx.fail("needs a floating-point input, got " + dtype_str(t) + "; cast it first (e.g. to f32)");
}

// One dim, normalized; a scalar accepts 0 / -1 as in PyTorch.
int64_t normalize_dim(const InferContext& ctx, int64_t dim, int64_t rank) {
  int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (dim < lo || dim > hi)
    ctx.fail("dim " + std::to_string(dim) + " is out of range for a " + std::to_string(rank) +
             "-d input (valid: " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
}

// Which dims are reduced; empty `dims` means all of them.
std::vector<bool> reduced_mask(const InferContext& ctx, const std::vector<int64_t>& dims) {
  int64_t rank = int64_t(ctx.input(0).rank());
  std::vector<bool> mask(size_t(rank), dims.empty());
  std::vector<bool> seen(size_t(std::max<int64_t>(rank, 1)), false);
  for (int64_t d : dims) {
    int64_t n = normalize_dim(ctx, d, rank);
    if (seen[size_t(n)]) ctx.fail("dim " + std::to_string(n) + " appears more than once in dims");
    seen[size_t(n)] = true;
    if (rank > 0) mask[size_t(n)] = true;
  }
  return mask;
}

// Static zero-size dims among the reduced ones: max/min/argmax have no identity to return.
void check_nonempty(const InferContext& ctx, const std::vector<bool>& mask) {
  const Shape& s = ctx.input(0).shape;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i] && s[i].is_static() && s[i].value() == 0)
      ctx.fail("cannot reduce over dim " + std::to_string(i) +
               " of size 0: the op has no identity; use a non-empty input");
}

Shape reduced_shape(const Shape& in, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!mask[i]) out.push_back(in[i]);
    else if (keepdim) out.push_back(SymInt(1));
  }
  return out;
}

std::vector<TensorType> dims_rule(const InferContext& ctx) {
  check_dtype(ctx);
  const TensorType& x = ctx.input(0);
  std::vector<bool> mask = reduced_mask(ctx, ctx.attrs().get_ints("dims"));
  OpKind k = ctx.kind();
  if (k == OpKind::ReduceMax || k == OpKind::ReduceMin) check_nonempty(ctx, mask);
  DType out = x.dtype;
  if ((k == OpKind::Sum || k == OpKind::Prod) && out == DType::Bool) out = DType::I64;
  return {{out, reduced_shape(x.shape, mask, ctx.attrs().get_bool("keepdim"))}};
}

std::vector<TensorType> arg_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  int64_t dim = normalize_dim(ctx, ctx.attrs().get_int("dim"), int64_t(x.rank()));
  std::vector<bool> mask(x.rank(), false);
  if (x.rank() > 0) mask[size_t(dim)] = true;
  check_nonempty(ctx, mask);
  return {{DType::I64, reduced_shape(x.shape, mask, ctx.attrs().get_bool("keepdim"))}};
}

std::vector<TensorType> softmax_rule(const InferContext& ctx) {
  check_dtype(ctx);
  normalize_dim(ctx, ctx.attrs().get_int("dim"), int64_t(ctx.input(0).rank()));
  return {ctx.input(0)};
}

OpDef op(OpKind kind, std::vector<AttrSpec> attrs, InferFn rule) {
  return define_op(kind, std::move(attrs), 1, 1, std::move(rule));
}

}  // namespace

void define_reduce(std::vector<OpDef>& t) {
  for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::Prod,
                   OpKind::LogSumExp})
    t.push_back(op(k,
                   {{"dims", AttrType::Ints, std::vector<int64_t>{}},
                    {"keepdim", AttrType::Bool, false}},
                   dims_rule));
  for (OpKind k : {OpKind::ArgMax, OpKind::ArgMin})
    t.push_back(op(k, {{"dim", AttrType::Int, std::nullopt}, {"keepdim", AttrType::Bool, false}},
                   arg_rule));
  for (OpKind k : {OpKind::Softmax, OpKind::LogSoftmax})
    t.push_back(op(k, {{"dim", AttrType::Int, std::nullopt}}, softmax_rule));
}

}  // namespace kiln::ops
