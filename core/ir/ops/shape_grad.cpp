// Gradient rules of the shape and view ops: a view's gradient is the inverse view of the output's;
// a gather's is a scatter-add, built from one-hot comparisons.
#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

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

std::vector<int64_t> ints(std::initializer_list<int64_t> v) { return v; }

// `v` reversed along `axis`.
Value* reverse(G& b, Value* v, int64_t axis) {
  return b.slice(v, ints({axis}), ints({-1}), ints({kSliceOpenBegin}), ints({-1}));
}

// A slice's gradient, one sliced axis at a time: the output's gradient placed back at the
// positions it read (a negative step reversed first), zeros elsewhere.
std::vector<Value*> slice_grad(G& b) {
  Value* x = b.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const std::vector<SymInt>& starts = b.attrs().get_syms("starts");
  std::vector<int64_t> axes = b.attrs().get_ints("axes"), steps = b.attrs().get_ints("steps");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  Value* v = b.grad();
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    const int64_t n = b.static_dim(x, axis, "input"), len = b.static_dim(b.output(), axis, "output");
    if (len == 0) return {b.zeros(x->type)};
    int64_t step = steps[i];
    int64_t first = slice_first(SymInt(n), starts[i], step).value();
    if (step < 0) {  // read from first down: the same positions, read upwards from the last
      v = reverse(b, v, axis);
      first += (len - 1) * step;
      step = -step;
    }
    v = b.dilate(v, {axis}, {step});
    std::vector<int64_t> pads(size_t(2 * rank), 0);
    pads[size_t(axis)] = first;
    pads[size_t(rank + axis)] = n - first - len * step;  // < 0 crops the last gap
    v = b.pad(v, pads);
  }
  return {v};
}

// An index normalized as the gathers read it: negative values count from the end of `size`.
Value* normalized_index(G& b, Value* index, int64_t size) {
  Value* zero = b.scalar(0, index->type.dtype);
  Value* wrapped = b.op(K::Add, {index, b.scalar(double(size), index->type.dtype)});
  return b.op(K::Where, {b.op(K::Lt, {index, zero}), wrapped, index});
}

// [0, 1, ..., size - 1] in `dtype`.
Value* arange(G& b, int64_t size, DType dtype) {
  std::vector<double> values;
  for (int64_t i = 0; i < size; ++i) values.push_back(double(i));
  return b.constant(values, {size}, dtype);
}

Shape with_last(Shape shape, SymInt last) {
  shape.push_back(last);
  return shape;
}

// A gather's operands: the input, the index, the input's rank, the gathered dim (normalized) and
// the input's size along it (static: the one-hot comparison spans it).
struct Gathered {
  Value* x;
  Value* index;
  int64_t rank, dim, size;
};

Gathered gathered(const G& b) {
  Value* x = b.input(0);
  const int64_t rank = int64_t(x->type.rank());
  int64_t dim = b.attrs().get_int("dim");
  if (dim < 0) dim += rank;
  return {x, b.input(1), rank, dim, b.static_dim(x, dim, "input")};
}

// torch.gather: every gradient element goes to the input element it read, summed where several
// read one (a scatter-add, built as a one-hot comparison along dim and a sum).
std::vector<Value*> gather_grad(G& b) {
  const auto [x, index, rank, dim, size] = gathered(b);
  std::vector<int64_t> to_last, back(static_cast<size_t>(rank), 0);  // dim moved last, and back
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) to_last.push_back(d);
  to_last.push_back(dim);
  for (int64_t d = 0; d < rank; ++d) back[size_t(to_last[size_t(d)])] = d;
  Value* idx = b.permute(normalized_index(b, index, size), to_last);
  Value* g = b.permute(b.grad(), to_last);
  Value* hit = b.op(K::Eq, {b.reshape(idx, with_last(idx->type.shape, 1)), arange(b, size, index->type.dtype)});
  Value* spread = b.op(K::Where, {hit, b.reshape(g, with_last(g->type.shape, 1)), b.scalar(0, g->type.dtype)});
  Value* dx = b.permute(b.sum(spread, {rank - 1}, false), back);
  // The index may be shorter than the input along the other dims: the rest gets no gradient.
  std::vector<int64_t> pads(size_t(2 * rank), 0);
  for (int64_t d = 0; d < rank; ++d) {
    const SymInt& want = x->type.shape[size_t(d)];
    const SymInt& have = dx->type.shape[size_t(d)];
    if (want.same_as(have)) continue;
    if (!want.is_static() || !have.is_static())
      b.fail("the gradient needs the index's and the input's sizes along dim " + std::to_string(d) +
             " as numbers when they differ, got " + index->type.str() + " and " + x->type.str());
    pads[size_t(rank + d)] = want.value() - have.value();
  }
  return {b.pad(dx, pads), nullptr};
}

// index_select (ONNX Gather): the gradient rows summed into the rows they were read from, as a
// matmul of the transposed one-hot index matrix [size, M] with the gradient [.., M, rest].
std::vector<Value*> index_select_grad(G& b) {
  const auto [x, index, rank, dim, size] = gathered(b);
  const DType dtype = x->type.dtype;
  const SymInt rows = numel(index->type.shape);
  Value* idx = b.reshape(normalized_index(b, index, size), {rows, SymInt(1)});
  Value* one_hot = b.cast_to(b.op(K::Eq, {idx, arange(b, size, index->type.dtype)}), dtype);  // [M, size]
  Shape lead(x->type.shape.begin(), x->type.shape.begin() + dim);
  const Shape rest(x->type.shape.begin() + dim + 1, x->type.shape.end());
  Value* g = b.reshape(b.grad(), with_last(with_last(lead, rows), numel(rest)));
  Value* dx = b.op(K::MatMul, {b.permute(one_hot, {1, 0}), g});  // [.., size, rest]
  return {b.reshape(dx, x->type.shape), nullptr};
}

// Constant padding's adjoint is the opposite padding (crops become zero fill and back). Reflect
// and edge padding also fold each border's gradient back onto the elements it copied.
std::vector<Value*> pad_grad(G& b) {
  Value* x = b.input(0);
  const std::vector<int64_t>& pads = b.attrs().get_ints("pads");
  const std::string& mode = b.attrs().get_string("mode");
  const int64_t rank = int64_t(x->type.rank());
  if (mode == "constant") {
    std::vector<int64_t> inverse;
    for (int64_t p : pads) inverse.push_back(-p);
    return {b.pad(b.grad(), inverse)};
  }
  Value* v = b.grad();
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t begin = pads[size_t(k)], end = pads[size_t(rank + k)];
    if (begin == 0 && end == 0) continue;
    const int64_t n = b.static_dim(x, k, "input");
    if (begin < 0 || end < 0) b.fail("the gradient of " + mode + " padding with negative pads is not supported yet");
    auto part = [&](int64_t from, int64_t to) { return b.slice(v, {k}, {from}, {to}, {1}); };
    auto at = [&](Value* piece, int64_t before, int64_t after) {  // placed along k, zeros around
      std::vector<int64_t> p(size_t(2 * rank), 0);
      p[size_t(k)] = before;
      p[size_t(rank + k)] = after;
      return b.pad(piece, p);
    };
    Value* total = part(begin, begin + n);
    if (begin > 0) {
      // reflect: border element j copied x[begin - j]; edge: every one copied x[0].
      Value* left = mode == "reflect" ? at(reverse(b, part(0, begin), k), 1, n - 1 - begin)
                                      : at(b.sum(part(0, begin), {k}, true), 0, n - 1);
      total = b.op(K::Add, {total, left});
    }
    if (end > 0) {
      // reflect: border element j copied x[n - 2 - j]; edge: every one copied x[n - 1].
      Value* right = mode == "reflect" ? at(reverse(b, part(begin + n, begin + n + end), k), n - 1 - end, 1)
                                       : at(b.sum(part(begin + n, begin + n + end), {k}, true), n - 1, 0);
      total = b.op(K::Add, {total, right});
    }
    v = total;
  }
  return {v};
}

// tile: [r0 * d0, r1 * d1, ..] seen as [r0, d0, r1, d1, ..] and summed over the repeats.
std::vector<Value*> tile_grad(G& b) {
  Value* x = b.input(0);
  const std::vector<int64_t>& repeats = b.attrs().get_ints("repeats");
  Shape split;
  std::vector<int64_t> repeat_dims;
  for (size_t d = 0; d < repeats.size(); ++d) {
    repeat_dims.push_back(int64_t(split.size()));
    split.push_back(repeats[d]);
    split.push_back(x->type.shape[d]);
  }
  if (repeats.empty()) return {b.grad()};
  return {b.reshape(b.sum(b.reshape(b.grad(), split), repeat_dims, false), x->type.shape)};
}

}  // namespace

void define_shape_grads(std::vector<OpDef>& t) {
  t[size_t(K::Constant)].gradient = Gradient::None;
  t[size_t(K::SymInts)].gradient = Gradient::None;
  t[size_t(K::Arange)].gradient = Gradient::None;
  t[size_t(K::RandUniform)].gradient = Gradient::None;
  set_rule(t, K::Reshape, [](G& b) -> std::vector<Value*> {
    AttrMap attrs;
    attrs.set("shape", b.input(0)->type.shape);
    return {b.op(K::Reshape, {b.grad()}, attrs)};
  });
  set_rule(t, K::Permute, [](G& b) -> std::vector<Value*> {
    const std::vector<int64_t>& dims = b.attrs().get_ints("dims");
    std::vector<int64_t> inverse(dims.size());
    const int64_t rank = int64_t(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(dims[i] < 0 ? dims[i] + rank : dims[i])] = int64_t(i);
    AttrMap attrs;
    attrs.set("dims", inverse);
    return {b.op(K::Permute, {b.grad()}, attrs)};
  });
  set_rule(t, K::Expand, [](G& b) -> std::vector<Value*> { return {b.sum_to(b.grad(), b.input(0)->type.shape)}; });
  set_rule(t, K::Concat, [](G& b) -> std::vector<Value*> {  // the gradient split back into the pieces
    int64_t dim = b.attrs().get_int("dim");
    if (dim < 0) dim += int64_t(b.output()->type.rank());
    AttrMap attrs;
    attrs.set("dim", dim);
    attrs.set("sizes", static_sizes(b, b.node().inputs, dim));
    if (b.node().inputs.size() == 1) return {b.grad()};
    return b.op_outputs(K::Split, {b.grad()}, attrs);
  });
  set_rule(t, K::Split, [](G& b) -> std::vector<Value*> {  // the pieces' gradients concatenated
    int64_t dim = b.attrs().get_int("dim");
    if (dim < 0) dim += int64_t(b.input(0)->type.rank());
    std::vector<Value*> pieces;
    for (size_t i = 0; i < b.node().outputs.size(); ++i) pieces.push_back(b.grad(i));
    AttrMap attrs;
    attrs.set("dim", dim);
    return {pieces.size() == 1 ? pieces[0] : b.op(K::Concat, pieces, attrs)};
  });
  set_rule(t, K::Slice, slice_grad);
  set_rule(t, K::Gather, gather_grad);
  set_rule(t, K::IndexSelect, index_select_grad);
  set_rule(t, K::Pad, pad_grad);
  set_rule(t, K::Tile, tile_grad);
}

}  // namespace kiln::ops
