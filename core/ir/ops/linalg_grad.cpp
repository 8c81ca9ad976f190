// Gradient rules of matmul (numpy semantics, batch broadcasting), gemm and linear, written as
// matmuls of the gradient with the other operand transposed.
#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

Value* reshape(G& b, Value* v, const Shape& shape) {
  if (shape_str(v->type.shape) == shape_str(shape)) return v;
  AttrMap attrs;
  attrs.set("shape", shape);
  return b.op(K::Reshape, {v}, attrs);
}

// The last two dims swapped.
Value* transpose(G& b, Value* v) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < v->type.rank(); ++d) dims.push_back(int64_t(d));
  std::swap(dims[dims.size() - 2], dims[dims.size() - 1]);
  AttrMap attrs;
  attrs.set("dims", dims);
  return b.op(K::Permute, {v}, attrs);
}

Value* matmul(G& b, Value* x, Value* y) { return b.op(K::MatMul, {x, y}); }
Value* scaled(G& b, Value* v, double s) { return s == 1.0 ? v : b.op(K::Mul, {v, b.scalar(s, v->type.dtype)}); }

}  // namespace

void define_linalg_grads(std::vector<OpDef>& t) {
  t[size_t(K::MatMul)].gradient = Gradient::Rule;
  t[size_t(K::MatMul)].vjp = [](G& b) -> std::vector<Value*> {
    Value* a = b.input(0);
    Value* bv = b.input(1);
    // 1-d operands are a row (a) or a column (b) vector, as numpy promotes them.
    Value* a2 = a->type.rank() == 1 ? reshape(b, a, {SymInt(1), a->type.shape[0]}) : a;
    Value* b2 = bv->type.rank() == 1 ? reshape(b, bv, {bv->type.shape[0], SymInt(1)}) : bv;
    Value* g = b.grad();
    if (a2 != a || b2 != bv) g = reshape(b, g, infer_types(K::MatMul, {a2->type, b2->type}, {}, {})[0].shape);
    std::vector<Value*> out = {nullptr, nullptr};
    if (b.wanted(0)) out[0] = reshape(b, b.sum_to(matmul(b, g, transpose(b, b2)), a2->type.shape), a->type.shape);
    if (b.wanted(1)) out[1] = reshape(b, b.sum_to(matmul(b, transpose(b, a2), g), b2->type.shape), bv->type.shape);
    return out;
  };

  t[size_t(K::Linear)].gradient = Gradient::Rule;
  t[size_t(K::Linear)].vjp = [](G& b) -> std::vector<Value*> {  // y = x w^T + bias
    Value* x = b.input(0);
    Value* w = b.input(1);
    Value* g = b.grad();
    std::vector<Value*> out(b.node().inputs.size(), nullptr);
    if (b.wanted(0)) out[0] = matmul(b, g, w);
    if (b.wanted(1)) {
      // Every leading dim is a batch dim: flatten them, then g^T x.
      Value* g2 = reshape(b, g, {SymInt(-1), w->type.shape[0]});
      Value* x2 = reshape(b, x, {SymInt(-1), w->type.shape[1]});
      out[1] = matmul(b, transpose(b, g2), x2);
    }
    if (out.size() == 3 && b.wanted(2)) out[2] = b.sum_to(g, b.input(2)->type.shape);
    return out;
  };

  t[size_t(K::Gemm)].gradient = Gradient::Rule;
  t[size_t(K::Gemm)].vjp = [](G& b) -> std::vector<Value*> {  // y = alpha op(A) op(B) + beta C
    const double alpha = b.attrs().get_float("alpha"), beta = b.attrs().get_float("beta");
    const bool ta = b.attrs().get_bool("trans_a"), tb = b.attrs().get_bool("trans_b");
    Value* a = ta ? transpose(b, b.input(0)) : b.input(0);
    Value* bv = tb ? transpose(b, b.input(1)) : b.input(1);
    Value* g = b.grad();
    std::vector<Value*> out(b.node().inputs.size(), nullptr);
    if (b.wanted(0)) {
      Value* ga = scaled(b, matmul(b, g, transpose(b, bv)), alpha);
      out[0] = ta ? transpose(b, ga) : ga;
    }
    if (b.wanted(1)) {
      Value* gb = scaled(b, matmul(b, transpose(b, a), g), alpha);
      out[1] = tb ? transpose(b, gb) : gb;
    }
    if (out.size() == 3 && b.wanted(2)) out[2] = b.sum_to(scaled(b, g, beta), b.input(2)->type.shape);
    return out;
  };
}

}  // namespace kiln::ops
