// Gradient rules of the reductions and the row ops (softmax, log_softmax, logsumexp).
#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

// The reduced dims of a dims/keepdim reduction, normalized; empty `dims` reduces every dim.
std::vector<int64_t> reduced_dims(const G& b) {
  const int64_t rank = int64_t(b.input(0)->type.rank());
  std::vector<int64_t> dims = b.attrs().get_ints("dims");
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
  for (int64_t& d : dims)
    if (d < 0) d += rank;
  return dims;
}

// `v` (a reduction's result or its gradient) with the reduced dims back as 1s.
Value* with_kept_dims(G& b, Value* v, const std::vector<int64_t>& dims) {
  if (b.attrs().get_bool("keepdim")) return v;
  Shape kept = b.input(0)->type.shape;
  for (int64_t d : dims) kept[size_t(d)] = SymInt(1);
  AttrMap attrs;
  attrs.set("shape", kept);
  return b.op(K::Reshape, {v}, attrs);
}

// `v` with kept dims, broadcast to the input's shape.
Value* spread(G& b, Value* v, const std::vector<int64_t>& dims) {
  AttrMap attrs;
  attrs.set("shape", b.input(0)->type.shape);
  return b.op(K::Expand, {with_kept_dims(b, v, dims)}, attrs);
}

Value* sum_keep(G& b, Value* v, const std::vector<int64_t>& dims) {
  AttrMap attrs;
  attrs.set("dims", dims);
  attrs.set("keepdim", true);
  return b.op(K::Sum, {v}, attrs);
}

// max/min over dims: the elements equal to the result share its gradient evenly (torch.amax).
std::vector<Value*> extremum_grad(G& b) {
  std::vector<int64_t> dims = reduced_dims(b);
  Value* x = b.input(0);
  Value* hit = b.op(K::Eq, {x, spread(b, b.output(), dims)});
  Value* count = sum_keep(b, b.cast_to(hit, x->type.dtype), dims);
  Value* share = b.op(K::Div, {with_kept_dims(b, b.grad(), dims), count});
  AttrMap attrs;
  attrs.set("shape", x->type.shape);
  Value* spread_share = b.op(K::Expand, {share}, attrs);
  return {b.op(K::Where, {hit, spread_share, b.scalar(0, x->type.dtype)})};
}

}  // namespace

void define_reduce_grads(std::vector<OpDef>& t) {
  set_rule(t, K::Sum, [](G& b) -> std::vector<Value*> { return {spread(b, b.grad(), reduced_dims(b))}; });
  set_rule(t, K::Mean, [](G& b) -> std::vector<Value*> {
    std::vector<int64_t> dims = reduced_dims(b);
    const TensorType& x = b.input(0)->type;
    Value* g = spread(b, b.grad(), dims);
    int64_t n = 1;
    for (int64_t d : dims) n = x.shape[size_t(d)].is_static() && n >= 0 ? n * x.shape[size_t(d)].value() : -1;
    if (n >= 0) return {b.op(K::Div, {g, b.scalar(double(n), x.dtype)})};
    // A symbolic reduced dim: the count is a sum of ones, so one program serves every size.
    AttrMap shape;
    shape.set("shape", x.shape);
    Value* ones = b.op(K::Expand, {b.scalar(1, x.dtype)}, shape);
    return {b.op(K::Div, {g, b.op(K::Expand, {sum_keep(b, ones, dims)}, shape)})};
  });
  set_rule(t, K::ReduceMax, extremum_grad);
  set_rule(t, K::ReduceMin, extremum_grad);
  set_rule(t, K::Prod, [](G& b) -> std::vector<Value*> {  // y / x; inputs with zeros need torch's product of others
    std::vector<int64_t> dims = reduced_dims(b);
    Value* x = b.input(0);
    Value* zero_free = b.op(K::Div, {spread(b, b.op(K::Mul, {b.grad(), b.output()}), dims), x});
    return {zero_free};
  });
  set_rule(t, K::LogSumExp, [](G& b) -> std::vector<Value*> {  // g exp(x - y)
    std::vector<int64_t> dims = reduced_dims(b);
    Value* x = b.input(0);
    Value* p = b.op(K::Exp, {b.op(K::Sub, {x, spread(b, b.output(), dims)})});
    return {b.op(K::Mul, {spread(b, b.grad(), dims), p})};
  });
  set_rule(t, K::Softmax, [](G& b) -> std::vector<Value*> {  // y (g - sum(g y))
    int64_t dim = b.attrs().get_int("dim");
    if (dim < 0) dim += int64_t(b.input(0)->type.rank());
    Value* y = b.output();
    Value* g = b.grad();
    Value* dot = sum_keep(b, b.op(K::Mul, {g, y}), {dim});
    return {b.op(K::Mul, {y, b.op(K::Sub, {g, dot})})};
  });
  set_rule(t, K::LogSoftmax, [](G& b) -> std::vector<Value*> {  // g - exp(y) sum(g)
    int64_t dim = b.attrs().get_int("dim");
    if (dim < 0) dim += int64_t(b.input(0)->type.rank());
    Value* g = b.grad();
    Value* total = sum_keep(b, g, {dim});
    return {b.op(K::Sub, {g, b.op(K::Mul, {b.op(K::Exp, {b.output()}), total})})};
  });
  for (K k : {K::ArgMax, K::ArgMin}) t[size_t(k)].gradient = Gradient::None;
}

}  // namespace kiln::ops
