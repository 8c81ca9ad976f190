// Gradient rules of the shape and view ops: a view's gradient is the inverse view of the output's.
#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

void set(std::vector<OpDef>& t, K kind, std::vector<Value*> (*rule)(G&)) {
  t[size_t(kind)].gradient = Gradient::Rule;
  t[size_t(kind)].vjp = rule;
}

// Sizes along `dim` of each value, which must be static for split/concat.
std::vector<int64_t> static_sizes(const G& b, const std::vector<Value*>& values, int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Value* v : values) {
    const SymInt& s = v->type.shape.at(size_t(dim));
    if (!s.is_static())
      b.fail("the gradient needs the sizes along dim " + std::to_string(dim) + " to be static, got " +
             v->type.str());
    sizes.push_back(s.value());
  }
  return sizes;
}

}  // namespace

void define_shape_grads(std::vector<OpDef>& t) {
  t[size_t(K::Constant)].gradient = Gradient::None;
  set(t, K::Reshape, [](G& b) -> std::vector<Value*> {
    AttrMap attrs;
    attrs.set("shape", b.input(0)->type.shape);
    return {b.op(K::Reshape, {b.grad()}, attrs)};
  });
  set(t, K::Permute, [](G& b) -> std::vector<Value*> {
    const std::vector<int64_t>& dims = b.attrs().get_ints("dims");
    std::vector<int64_t> inverse(dims.size());
    const int64_t rank = int64_t(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(dims[i] < 0 ? dims[i] + rank : dims[i])] = int64_t(i);
    AttrMap attrs;
    attrs.set("dims", inverse);
    return {b.op(K::Permute, {b.grad()}, attrs)};
  });
  set(t, K::Expand, [](G& b) -> std::vector<Value*> { return {b.sum_to(b.grad(), b.input(0)->type.shape)}; });
  set(t, K::Concat, [](G& b) -> std::vector<Value*> {  // the gradient split back into the pieces
    int64_t dim = b.attrs().get_int("dim");
    if (dim < 0) dim += int64_t(b.output()->type.rank());
    AttrMap attrs;
    attrs.set("dim", dim);
    attrs.set("sizes", static_sizes(b, b.node().inputs, dim));
    if (b.node().inputs.size() == 1) return {b.grad()};
    return b.op_outputs(K::Split, {b.grad()}, attrs);
  });
  set(t, K::Split, [](G& b) -> std::vector<Value*> {  // the pieces' gradients concatenated
    int64_t dim = b.attrs().get_int("dim");
    if (dim < 0) dim += int64_t(b.input(0)->type.rank());
    std::vector<Value*> pieces;
    for (size_t i = 0; i < b.node().outputs.size(); ++i) pieces.push_back(b.grad(i));
    AttrMap attrs;
    attrs.set("dim", dim);
    return {pieces.size() == 1 ? pieces[0] : b.op(K::Concat, pieces, attrs)};
  });
}

}  // namespace kiln::ops
