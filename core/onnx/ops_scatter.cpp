// ONNX indexed writes and reads with no single kiln op: ScatterElements/Scatter and ScatterND as
// one-hot masks (index == position) summed over the updates, GatherND as index_select on a
// flattened linear index, and Compress as index_select with the (fixed) condition's positions.
#include <cstring>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

Ints dims_of(N& n, const TensorType& t) {
  if (!is_static(t.shape)) n.unsupported(n.op_type() + " of a tensor with symbolic dims " + t.str());
  return static_dims(t.shape);
}

Value* ints_value(N& n, const Ints& v, Ints shape) {
  Literal lit{DType::I64, std::move(shape), std::vector<uint8_t>(v.size() * 8)};
  if (!v.empty()) std::memcpy(lit.bytes.data(), v.data(), v.size() * 8);
  return n.constant_value(lit);
}

Ints iota(int64_t count) {
  Ints v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = i;
  return v;
}

// Negative indices count from the end of a dim of `size`.
Value* wrap(N& n, Value* idx, int64_t size) {
  idx = n.cast(idx, DType::I64);
  Value* neg = n.emit(OpKind::Lt, {idx, n.scalar(0, DType::I64)});
  return n.emit(OpKind::Where, {neg, n.emit(OpKind::Add, {idx, n.scalar(double(size), DType::I64)}), idx});
}

// Folds the scattered `sum` (or product) into `data` where `hit`, by ONNX's reduction attribute.
Value* combine(N& n, Value* data, Value* hit, Value* scattered, const std::string& reduction) {
  Value* merged = scattered;
  if (reduction == "add") merged = n.emit(OpKind::Add, {data, scattered});
  else if (reduction == "mul") merged = n.emit(OpKind::Mul, {data, scattered});
  else if (reduction != "none") n.unsupported("reduction '" + reduction + "'");
  return n.emit(OpKind::Where, {hit, merged, data});
}

// Sums (or multiplies, for reduction=mul) `updates` where `mask`, over dim `k`; also says where any hit.
std::pair<Value*, Value*> reduce_hits(N& n, Value* mask, Value* updates, int64_t k,
                                      const std::string& reduction) {
  const DType dt = updates->type.dtype;
  const bool mul = reduction == "mul";
  Value* picked = n.emit(OpKind::Where, {mask, updates, n.scalar(mul ? 1 : 0, dt)});
  Value* total = n.emit(mul ? OpKind::Prod : OpKind::Sum, {picked}, {{"dims", Ints{k}}, {"keepdim", false}});
  Value* count = n.emit(OpKind::Sum, {n.cast(mask, DType::I32)}, {{"dims", Ints{k}}, {"keepdim", false}});
  return {n.cast(total, dt), n.emit(OpKind::Gt, {count, n.scalar(0, DType::I32)})};
}

void map_scatter_elements(N& n) {
  Value* data = n.input(0);
  const Ints d = dims_of(n, data->type), id = dims_of(n, n.input_type(1));
  const int64_t rank = int64_t(d.size());
  if (int64_t(id.size()) != rank) n.fail("indices must have the data's rank");
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", 0), rank);
  const std::string reduction = n.attr_string("reduction", "none");
  // [I0.., K, 1, ..] == [1.., 1, D, ..]: the one-hot of each index along a new dim after `axis`.
  Shape with_one(n.input_type(1).shape);
  with_one.insert(with_one.begin() + axis + 1, SymInt(1));
  Value* idx = n.reshape(wrap(n, n.input(1), d[size_t(axis)]), with_one);
  Ints pshape(size_t(rank + 1), 1);
  pshape[size_t(axis + 1)] = d[size_t(axis)];
  Value* mask = n.emit(OpKind::Eq, {idx, ints_value(n, iota(d[size_t(axis)]), pshape)});
  Value* upd = n.reshape(n.input(2), with_one);
  auto [scattered, hit] = reduce_hits(n, mask, upd, axis, reduction);
  Ints pads(size_t(2 * rank), 0);  // indices may cover a leading block of the other dims
  bool short_dims = false;
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && id[size_t(k)] < d[size_t(k)]) {
      pads[size_t(rank + k)] = d[size_t(k)] - id[size_t(k)];
      short_dims = true;
    }
  if (short_dims) {
    AttrMap pa{{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}};
    scattered = n.emit(OpKind::Pad, {scattered}, pa);
    hit = n.emit(OpKind::Ne, {n.emit(OpKind::Pad, {n.cast(hit, DType::I32)}, pa), n.scalar(0, DType::I32)});
  }
  n.set_output(0, combine(n, data, hit, scattered, reduction));
}

// Linear offset of each index tuple (last dim of `indices`, q long) into data's first q dims.
Value* linear_index(N& n, const Ints& d, Value* indices, int64_t q, int64_t first = 0) {
  Ints strides(size_t(q), 1);
  for (int64_t j = q - 2; j >= 0; --j) strides[size_t(j)] = strides[size_t(j + 1)] * d[size_t(first + j + 1)];
  std::vector<Value*> parts;
  Value* idx = n.cast(indices, DType::I64);
  Ints sizes(static_cast<size_t>(q));
  for (int64_t j = 0; j < q; ++j) sizes[size_t(j)] = d[size_t(first + j)];
  // Wrap negative indices per component, then dot with the strides.
  Value* size_v = ints_value(n, sizes, {q});
  Value* neg = n.emit(OpKind::Lt, {idx, n.scalar(0, DType::I64)});
  idx = n.emit(OpKind::Where, {neg, n.emit(OpKind::Add, {idx, size_v}), idx});
  Value* scaled = n.emit(OpKind::Mul, {idx, ints_value(n, strides, {q})});
  const int64_t last = int64_t(indices->type.rank()) - 1;
  return n.emit(OpKind::Sum, {scaled}, {{"dims", Ints{last}}, {"keepdim", false}});
}

void map_scatter_nd(N& n) {
  Value* data = n.input(0);
  const Ints d = dims_of(n, data->type), id = dims_of(n, n.input_type(1));
  if (id.empty()) n.fail("indices must have rank >= 1");
  const int64_t q = id.back(), rank = int64_t(d.size());
  if (q > rank) n.fail("index tuples are longer than the data's rank");
  const std::string reduction = n.attr_string("reduction", "none");
  int64_t places = 1, rest = 1, count = 1;
  for (int64_t j = 0; j < rank; ++j) (j < q ? places : rest) *= d[size_t(j)];
  for (size_t j = 0; j + 1 < id.size(); ++j) count *= id[j];
  Value* lin = n.reshape(linear_index(n, d, n.input(1), q), {count, 1, 1});
  Value* mask = n.emit(OpKind::Eq, {lin, ints_value(n, iota(places), {1, places, 1})});
  Value* upd = n.reshape(n.input(2), {count, 1, rest});
  auto [scattered, hit] = reduce_hits(n, mask, upd, 0, reduction);  // [places, rest], [places, 1]
  Value* flat = n.reshape(data, {places, rest});
  n.set_output(0, n.reshape(combine(n, flat, hit, scattered, reduction), data->type.shape));
}

void map_gather_nd(N& n) {
  Value* data = n.input(0);
  const Ints d = dims_of(n, data->type), id = dims_of(n, n.input_type(1));
  if (id.empty()) n.fail("indices must have rank >= 1");
  const int64_t b = n.attr_int("batch_dims", 0), q = id.back(), rank = int64_t(d.size());
  if (b < 0 || b + q > rank || b >= int64_t(id.size())) n.fail("batch_dims/index length out of range");
  int64_t batches = 1, places = 1, rest = 1;
  for (int64_t j = 0; j < rank; ++j) (j < b ? batches : j < b + q ? places : rest) *= d[size_t(j)];
  Value* lin = linear_index(n, d, n.input(1), q, b);
  if (b > 0) {  // each batch element reads its own block of `places`
    Ints bshape(id.begin(), id.end() - 1);
    for (size_t j = size_t(b); j < bshape.size(); ++j) bshape[j] = 1;
    Ints offs = iota(batches);
    for (int64_t& o : offs) o *= places;
    lin = n.emit(OpKind::Add, {lin, ints_value(n, offs, bshape)});
  }
  Value* flat = n.reshape(data, {batches * places, rest});
  Value* picked = n.emit(OpKind::IndexSelect, {flat, lin}, {{"dim", int64_t(0)}});
  Shape out(n.input_type(1).shape.begin(), n.input_type(1).shape.end() - 1);
  for (int64_t j = b + q; j < rank; ++j) out.push_back(d[size_t(j)]);
  n.set_output(0, n.reshape(picked, out));
}

void map_compress(N& n) {
  Value* x = n.input(0);
  const Literal& cond = n.require_constant(1, "condition (it decides the output shape)");
  Value* src = x;
  int64_t axis = 0;
  if (n.has_attr("axis")) {
    axis = normalize_axis_or(n, n.attr_int("axis", 0), int64_t(x->type.rank()));
  } else {
    src = n.reshape(x, {numel(x->type.shape)});
  }
  const SymInt& len = src->type.shape[size_t(axis)];
  Ints keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.element(i) != 0) {
      if (len.is_static() && i >= len.value()) n.fail("condition is longer than the axis");
      keep.push_back(i);
    }
  if (keep.empty()) n.unsupported("an all-false condition (an empty result)");
  n.set_output(0, n.emit(OpKind::IndexSelect, {src, ints_value(n, keep, {int64_t(keep.size())})},
                         {{"dim", axis}}));
}

}  // namespace

void register_scatter_ops(OpTable& t) {
  t["ScatterElements"] = map_scatter_elements;
  t["Scatter"] = map_scatter_elements;  // opset 9-10 name, same semantics
  t["ScatterND"] = map_scatter_nd;
  t["GatherND"] = map_gather_nd;
  t["Compress"] = map_compress;
}

}  // namespace kiln::onnx::detail
