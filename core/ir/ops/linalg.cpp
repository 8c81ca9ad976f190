// Shape and dtype rules of the linalg ops: matmul (numpy semantics), gemm (ONNX Gemm), linear.
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

// Matrix products are defined on numbers; bool operands would need a logical semiring.
void require_numeric_and_equal(const InferContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  for (const TensorType& t : ctx.inputs()) {
    if (t.dtype == DType::Bool) ctx.fail("is not defined for bool operands; cast them first");
    if (t.dtype != dtype)
      ctx.fail("operand dtypes must match, got " + std::string(dtype_name(dtype)) + " and " +
               std::string(dtype_name(t.dtype)) + "; cast one of them");
  }
}

std::vector<TensorType> matmul_rule(const InferContext& ctx) {
  require_numeric_and_equal(ctx);
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.rank() == 0 || b.rank() == 0)
    ctx.fail("needs operands of rank >= 1, got " + a.str() + " and " + b.str() +
             "; use mul for scalars");
  // 1-d operands act as [1, K] and [K, 1]; the added dim is dropped from the result.
  Shape sa = a.shape, sb = b.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), SymInt(1));
  if (sb.size() == 1) sb.push_back(SymInt(1));
  const SymInt& ka = sa[sa.size() - 1];
  const SymInt& kb = sb[sb.size() - 2];
  if (ka != kb)
    ctx.fail("inner dimensions differ: " + a.str() + " has " + ka.str() + " columns but " +
             b.str() + " has " + kb.str() + " rows");
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  auto batch = broadcast_shapes(batch_a, batch_b);
  if (!batch)
    ctx.fail("batch dimensions " + shape_str(batch_a) + " and " + shape_str(batch_b) +
             " cannot be broadcast together");
  Shape out = *batch;
  if (a.rank() > 1) out.push_back(sa[sa.size() - 2]);
  if (b.rank() > 1) out.push_back(sb[sb.size() - 1]);
  return {{a.dtype, out}};
}

std::vector<TensorType> gemm_rule(const InferContext& ctx) {
  require_numeric_and_equal(ctx);
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail("needs 2-d operands, got " + a.str() + " and " + b.str() + "; use matmul for batches");
  const bool ta = ctx.attrs().get_bool("trans_a"), tb = ctx.attrs().get_bool("trans_b");
  const SymInt m = ta ? a.shape[1] : a.shape[0], ka = ta ? a.shape[0] : a.shape[1];
  const SymInt kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (ka != kb)
    ctx.fail("inner dimensions differ: op(A) of " + a.str() + " has " + ka.str() +
             " columns but op(B) of " + b.str() + " has " + kb.str() + " rows (trans_a=" +
             (ta ? "true" : "false") + ", trans_b=" + (tb ? "true" : "false") + ")");
  Shape out = {m, n};
  if (ctx.num_inputs() == 3) {
    const TensorType& c = ctx.input(2);
    auto bc = broadcast_shapes(c.shape, out);
    if (c.rank() > 2 || !bc || bc->size() != 2 || (*bc)[0] != m || (*bc)[1] != n)
      ctx.fail("C " + c.str() + " does not broadcast to the result shape " + shape_str(out));
  }
  return {{a.dtype, out}};
}

std::vector<TensorType> linear_rule(const InferContext& ctx) {
  require_numeric_and_equal(ctx);
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  if (x.rank() < 1) ctx.fail("input must have rank >= 1, got " + x.str());
  if (w.rank() != 2) ctx.fail("weight must be 2-d [out_features, in_features], got " + w.str());
  if (x.shape.back() != w.shape[1])
    ctx.fail("input " + x.str() + " has " + x.shape.back().str() + " features but weight " +
             w.str() + " expects " + w.shape[1].str());
  if (ctx.num_inputs() == 3) {
    const TensorType& bias = ctx.input(2);
    if (bias.rank() != 1 || bias.shape[0] != w.shape[0])
      ctx.fail("bias must be 1-d with " + w.shape[0].str() + " elements, got " + bias.str());
  }
  Shape out = x.shape;
  out.back() = w.shape[0];
  return {{x.dtype, out}};
}

}  // namespace

void define_linalg(std::vector<OpDef>& t) {
  OpDef matmul;
  matmul.kind = OpKind::MatMul;
  matmul.min_inputs = matmul.max_inputs = 2;
  matmul.infer = matmul_rule;
  t.push_back(std::move(matmul));

  OpDef gemm;
  gemm.kind = OpKind::Gemm;
  gemm.attrs = {{"alpha", AttrType::Float, 1.0},
                {"beta", AttrType::Float, 1.0},
                {"trans_a", AttrType::Bool, false},
                {"trans_b", AttrType::Bool, false}};
  gemm.min_inputs = 2;  // A, B, optional C
  gemm.max_inputs = 3;
  gemm.infer = gemm_rule;
  t.push_back(std::move(gemm));

  OpDef linear;
  linear.kind = OpKind::Linear;
  linear.min_inputs = 2;  // x, weight, optional bias
  linear.max_inputs = 3;
  linear.infer = linear_rule;
  t.push_back(std::move(linear));
}

}  // namespace kiln::ops
