// ONNX data-movement and constant ops -> kiln shape ops: Reshape, Transpose, Concat, Split, Slice,
// Squeeze/Unsqueeze, Gather/GatherElements, Expand, Tile, Pad, DepthToSpace/SpaceToDepth, and the
// ops computed at import time (Shape, Size, Constant, ConstantOfShape, Range, EyeLike, Trilu's mask).
// Shape and Size of symbolic dims give SymInt expressions (shape_values.cpp), which Reshape,
// Expand, Slice and ConstantOfShape take as operands.
#include <cmath>
#include <cstring>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

Literal ints_literal(const Ints& v, Ints shape) {
  Literal lit;
  lit.dtype = DType::I64;
  lit.shape = std::move(shape);
  lit.bytes.resize(v.size() * 8);
  if (!v.empty()) std::memcpy(lit.bytes.data(), v.data(), v.size() * 8);
  return lit;
}

// A literal of `shape` whose every element is `value` (given as a one-element literal).
Literal filled(const Literal& value, const Ints& shape) {
  Literal lit;
  lit.dtype = value.dtype;
  lit.shape = shape;
  const size_t elem = dtype_size(value.dtype);
  lit.bytes.resize(size_t(lit.numel()) * elem);
  for (size_t i = 0; i < lit.bytes.size(); i += elem)
    std::memcpy(lit.bytes.data() + i, value.bytes.data(), elem);
  return lit;
}

Ints static_shape(N& n, const TensorType& t, const std::string& why) {
  if (!is_static(t.shape)) n.unsupported(why + " of a tensor with symbolic dims " + t.str());
  return static_dims(t.shape);
}

// Negative indices count from the end: normalized in the literal when constant, else by ops. Along
// a symbolic dim a constant index list becomes size + i expressions, and other indices add the
// run's size where they are negative.
Value* wrap_indices(N& n, Value* idx, const SymInt& size) {
  if (const Literal* lit = constant_of(idx)) {
    if (!size.is_static()) {
      std::optional<ShapeValues> known = shape_values_of(idx);
      bool negative = false;
      for (int64_t i = 0; i < lit->numel(); ++i) negative = negative || lit->element(i) < 0;
      if (!negative) return idx;
      if (!known) n.unsupported("negative indices along the symbolic dim " + size.str());
      for (SymInt& v : known->values)
        if (v.value() < 0) v = size + v;
      return n.shape_value(*known);
    }
    Ints v(size_t(lit->numel()));
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = int64_t(lit->element(int64_t(i)));
      if (v[i] < 0) v[i] += size.value();
    }
    return n.cast(n.constant_value(ints_literal(v, lit->shape)), lit->dtype);
  }
  const DType dt = idx->type.dtype;
  Value* neg = n.emit(OpKind::Lt, {idx, n.scalar(0, dt)});
  Value* count = size.is_static() ? n.scalar(double(size.value()), dt) : n.shape_value({dt, true, {size}});
  Value* up = n.emit(OpKind::Add, {idx, count});
  return n.emit(OpKind::Where, {neg, up, idx});
}

Shape syms(const Ints& v) { return {v.begin(), v.end()}; }

void map_reshape(N& n) {
  Value* x = n.input(0);
  const Shape target = n.opset() < 5 ? syms(n.attr_ints("shape")) : n.sym_ints(1, "shape");
  const bool allow_zero = n.attr_int("allowzero", 0) != 0;
  Shape out;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_static() && target[i].value() == 0 && !allow_zero) {
      if (i >= x->type.rank()) n.fail("shape has a 0 (copy) beyond the input's rank");
      out.push_back(x->type.shape[i]);
    } else {
      out.push_back(target[i]);
    }
  }
  n.set_output(0, n.reshape(x, out));
}

void map_transpose(N& n) {
  Value* x = n.input(0);
  Ints perm = n.attr_ints("perm");
  if (perm.empty())
    for (int64_t i = int64_t(x->type.rank()) - 1; i >= 0; --i) perm.push_back(i);
  n.set_output(0, n.emit(OpKind::Permute, {x}, {{"dims", perm}}));
}

void map_split(N& n) {
  Value* x = n.input(0);
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", 0), int64_t(x->type.rank()));
  Ints sizes = n.opset() < 13 ? n.attr_ints("split")
                              : (n.has_input(1) ? n.constant_ints(1, "split") : Ints{});
  if (sizes.empty()) {
    const SymInt& d = x->type.shape[size_t(axis)];
    const int64_t parts = int64_t(n.num_outputs());
    if (!d.is_static() && parts > 0) {  // equal parts of a symbolic dim: one slice per part
      const SymInt part = d / parts;
      for (int64_t i = 0; i < parts; ++i)
        n.set_output(size_t(i), n.emit(OpKind::Slice, {x}, {{"axes", Ints{axis}}, {"starts", Shape{part * i}},
                                                            {"ends", Shape{part * (i + 1)}}}));
      return;
    }
    if (parts == 0 || d.value() % parts != 0)
      n.fail("dim " + d.str() + " does not split evenly into " + std::to_string(parts));
    sizes.assign(size_t(parts), d.value() / parts);
  }
  std::vector<Value*> outs =
      n.emit_multi(OpKind::Split, {x}, {{"dim", axis}, {"sizes", sizes}});
  for (size_t i = 0; i < outs.size(); ++i) n.set_output(i, outs[i]);
}

void map_slice(N& n) {
  Value* x = n.input(0);
  Shape starts, ends;
  Ints axes, steps;
  if (n.opset() < 10) {
    starts = syms(n.attr_ints("starts"));
    ends = syms(n.attr_ints("ends"));
    axes = n.attr_ints("axes");
  } else {
    starts = n.sym_ints(1, "starts");
    ends = n.sym_ints(2, "ends");
    if (n.has_input(3)) axes = n.constant_ints(3, "axes");
    if (n.has_input(4)) steps = n.constant_ints(4, "steps");
  }
  n.set_output(0, n.emit(OpKind::Slice, {x},
                         {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}}));
}

void map_squeeze(N& n, bool unsqueeze) {
  Value* x = n.input(0);
  Ints axes = n.opset() < 13 ? n.attr_ints("axes")
                             : (n.has_input(1) ? n.constant_ints(1, "axes") : Ints{});
  const Shape& in = x->type.shape;
  Shape out;
  if (unsqueeze) {
    const int64_t rank = int64_t(in.size() + axes.size());
    std::vector<bool> is_new(size_t(rank), false);
    for (int64_t a : axes) {
      a = normalize_axis_or(n, a, rank);
      if (is_new[size_t(a)]) n.fail("axis " + std::to_string(a) + " repeated");
      is_new[size_t(a)] = true;
    }
    size_t k = 0;
    for (int64_t i = 0; i < rank; ++i) out.push_back(is_new[size_t(i)] ? SymInt(1) : in[k++]);
  } else {
    const int64_t rank = int64_t(in.size());
    std::vector<bool> drop(size_t(rank), false);
    for (int64_t a : axes) drop[size_t(normalize_axis_or(n, a, rank))] = true;
    for (int64_t i = 0; i < rank; ++i) {
      const SymInt& d = in[size_t(i)];
      const bool one = d.is_static() && d.value() == 1;
      if (axes.empty() ? one : drop[size_t(i)]) {
        if (!axes.empty() && !one) n.fail("cannot squeeze dim " + std::to_string(i) + " of size " + d.str());
        continue;
      }
      out.push_back(d);
    }
  }
  n.set_output(0, n.reshape(x, out));
}

void map_gather(N& n, bool elements) {
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", 0), rank);
  Value* idx = wrap_indices(n, n.input(1), x->type.shape[size_t(axis)]);
  n.set_output(0, n.emit(elements ? OpKind::Gather : OpKind::IndexSelect, {x, idx}, {{"dim", axis}}));
}

// Repeats computed from symbolic dims tile by broadcasting: x viewed as [1, d0, 1, d1, ...],
// expanded to [r0, d0, r1, d1, ...], then merged to [r0*d0, r1*d1, ...].
void map_tile(N& n) {
  Value* x = n.input(0);
  const Shape repeats = n.sym_ints(1, "repeats");
  if (is_static(repeats)) {
    n.set_output(0, n.emit(OpKind::Tile, {x}, {{"repeats", static_dims(repeats)}}));
    return;
  }
  const Shape& dims = x->type.shape;
  if (repeats.size() != dims.size())
    n.fail("repeats " + shape_str(repeats) + " must have one entry per dim of " + x->type.str());
  Shape spread, expanded, merged;
  for (size_t i = 0; i < dims.size(); ++i) {
    spread.insert(spread.end(), {SymInt(1), dims[i]});
    expanded.insert(expanded.end(), {repeats[i], dims[i]});
    merged.push_back(repeats[i] * dims[i]);
  }
  Value* wide = n.emit(OpKind::Expand, {n.reshape(x, spread)}, {{"shape", expanded}});
  n.set_output(0, n.reshape(wide, merged));
}

void map_pad(N& n) {
  Value* x = n.input(0);
  std::string mode = n.attr_string("mode", "constant");
  Ints pads;
  double value = 0;
  if (n.opset() < 11) {
    pads = n.attr_ints("pads");
    value = n.attr_float("value", 0.0);
  } else {
    pads = n.constant_ints(1, "pads");
    if (n.has_input(2)) {
      const Literal& v = n.require_constant(2, "constant_value");
      if (v.numel() > 0) value = v.element(0);
    }
    if (n.has_input(3)) n.unsupported("the axes input");
  }
  if (mode == "wrap") n.unsupported("mode 'wrap'");
  n.set_output(0, n.emit(OpKind::Pad, {x}, {{"pads", pads}, {"mode", mode}, {"value", value}}));
}

void map_space_depth(N& n, bool to_space) {
  Value* x = n.input(0);
  const Ints s = static_shape(n, x->type, "DepthToSpace/SpaceToDepth");
  if (s.size() != 4) n.fail("input must be [N, C, H, W]");
  const int64_t b = n.attr_int("blocksize", 0);
  if (b <= 0) n.fail("blocksize must be positive");
  const int64_t N0 = s[0], C = s[1], H = s[2], W = s[3];
  Value* y;
  if (to_space) {
    if (C % (b * b)) n.fail("channels must divide by blocksize^2");
    const bool crd = n.attr_string("mode", "DCR") == "CRD";
    y = crd ? n.reshape(x, {N0, C / (b * b), b, b, H, W}) : n.reshape(x, {N0, b, b, C / (b * b), H, W});
    y = n.emit(OpKind::Permute, {y}, {{"dims", crd ? Ints{0, 1, 4, 2, 5, 3} : Ints{0, 3, 4, 1, 5, 2}}});
    y = n.reshape(y, {N0, C / (b * b), H * b, W * b});
  } else {
    if (H % b || W % b) n.fail("height and width must divide by blocksize");
    y = n.reshape(x, {N0, C, H / b, b, W / b, b});
    y = n.emit(OpKind::Permute, {y}, {{"dims", Ints{0, 3, 5, 1, 2, 4}}});
    y = n.reshape(y, {N0, C * b * b, H / b, W / b});
  }
  n.set_output(0, y);
}

void map_constant(N& n) {
  Literal lit;
  if (n.has_attr("value")) {
    lit = n.attr_tensor("value");
  } else if (n.has_attr("value_float")) {
    const float f = float(n.attr_float("value_float", 0));
    lit = {DType::F32, {}, std::vector<uint8_t>(4)};
    std::memcpy(lit.bytes.data(), &f, 4);
  } else if (n.has_attr("value_floats")) {
    std::vector<float> v;
    for (double d : n.attr_floats("value_floats")) v.push_back(float(d));
    lit = {DType::F32, {int64_t(v.size())}, std::vector<uint8_t>(v.size() * 4)};
    if (!v.empty()) std::memcpy(lit.bytes.data(), v.data(), v.size() * 4);
  } else if (n.has_attr("value_int")) {
    lit = ints_literal({n.attr_int("value_int", 0)}, {});
  } else if (n.has_attr("value_ints")) {
    const Ints v = n.attr_ints("value_ints");
    lit = ints_literal(v, {int64_t(v.size())});
  } else {
    n.unsupported("a sparse or string value");
  }
  n.set_output(0, n.constant_value(lit));
}

void map_constant_of_shape(N& n) {
  const Shape shape = n.sym_ints(0, "shape");
  Literal value = {DType::F32, {}, std::vector<uint8_t>(4, 0)};
  if (n.has_attr("value")) value = n.attr_tensor("value");
  if (value.numel() != 1) n.fail("value must hold one element");
  for (const SymInt& d : shape)
    if (d.is_static() && d.value() < 0) n.fail("shape has a negative size");
  value.shape.clear();
  if (is_static(shape)) return n.set_output(0, n.constant_value(filled(value, static_dims(shape))));
  // A symbolic size: the value broadcast at run time.
  n.set_output(0, n.emit(OpKind::Expand, {n.constant_value(value)}, {{"shape", shape}}));
}

// Range(start, limit, delta) with a limit computed from symbolic dims (arange(seq) for position
// ids): an arange op whose count is ceil((limit - start) / delta), clamped at 0.
void map_symbolic_range(N& n, const SymInt& limit) {
  const Literal& start = n.require_constant(0, "start");
  const Literal& delta = n.require_constant(2, "delta");
  const double s = start.element(0), d = delta.element(0);
  if (is_floating(start.dtype) || s != std::floor(s) || d != std::floor(d) || d == 0)
    n.unsupported("Range to a symbolic limit (" + limit.str() + ") with a start or delta that is "
                  "not an integer");
  const int64_t s0 = int64_t(s), d0 = int64_t(d);
  const SymInt span = d0 > 0 ? limit - s0 + (d0 - 1) : SymInt(s0) - limit + (-d0 - 1);
  const SymInt count = sym_max(0, span / (d0 > 0 ? d0 : -d0));
  n.set_output(0, n.emit(OpKind::Arange, {}, {{"start", s}, {"step", d}, {"count", Shape{count}},
                                              {"dtype", start.dtype}}));
}

void map_range(N& n) {
  for (size_t i : {size_t(0), size_t(2)})
    if (std::optional<ShapeValues> sym = shape_values_of(n.input(i)); sym && !is_static(sym->values))
      n.unsupported("Range with a symbolic " + std::string(i == 0 ? "start" : "delta") + " (" +
                    shape_str(sym->values) + ")");
  if (std::optional<ShapeValues> limit = shape_values_of(n.input(1)); limit && !is_static(limit->values))
    return map_symbolic_range(n, limit->values.at(0));
  const Literal& start = n.require_constant(0, "start");
  const double s = start.element(0), limit = n.require_constant(1, "limit").element(0),
               delta = n.require_constant(2, "delta").element(0);
  if (delta == 0) n.fail("delta must not be 0");
  const int64_t count = std::max<int64_t>(0, int64_t(std::ceil((limit - s) / delta)));
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = s + double(i) * delta;
  Literal lit{start.dtype, {count}, std::vector<uint8_t>(size_t(count) * dtype_size(start.dtype))};
  convert_elements(v.data(), DType::F64, lit.bytes.data(), start.dtype, v.size());
  n.set_output(0, n.constant_value(lit));
}

void map_trilu(N& n) {
  Value* x = n.input(0);
  const Shape& s = x->type.shape;
  if (s.size() < 2) n.fail("input must have rank >= 2");
  const int64_t k = n.has_input(1) ? n.constant_ints(1, "k").at(0) : 0;
  Value* mask = band_mask(n, s[s.size() - 2], s.back(), k, n.attr_int("upper", 1) ? Band::Upper : Band::Lower);
  n.set_output(0, n.emit(OpKind::Where, {mask, x, n.scalar(0, x->type.dtype)}));
}

void map_eye_like(N& n) {
  const Shape& s = n.input_type(0).shape;
  if (s.size() != 2) n.fail("input must be 2-d");
  DType dt = n.input_type(0).dtype;
  if (n.has_attr("dtype") && !dtype_from_onnx(int(n.attr_int("dtype", 1)), &dt))
    n.unsupported("dtype " + onnx_type_name(int(n.attr_int("dtype", 1))));
  n.set_output(0, n.cast(band_mask(n, s[0], s[1], n.attr_int("k", 0), Band::Diagonal), dt));
}

}  // namespace

Value* band_mask(NodeContext& n, const SymInt& rows, const SymInt& cols, int64_t k, Band band) {
  auto keep = [&](int64_t i, int64_t j) {
    return band == Band::Diagonal ? j - i == k : band == Band::Upper ? j - i >= k : j - i <= k;
  };
  if (rows.is_static() && cols.is_static()) {
    const int64_t r = rows.value(), c = cols.value();
    Literal m{DType::Bool, {r, c}, std::vector<uint8_t>(size_t(r * c))};
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) m.bytes[size_t(i * c + j)] = keep(i, j);
    return n.constant_value(m);
  }
  // Symbolic sizes: column minus row index, compared with k at run time (two aranges).
  Value* row = n.reshape(n.emit(OpKind::Arange, {}, {{"count", Shape{rows}}}), {rows, 1});
  Value* col = n.reshape(n.emit(OpKind::Arange, {}, {{"count", Shape{cols}}}), {1, cols});
  const OpKind compare = band == Band::Diagonal ? OpKind::Eq : band == Band::Upper ? OpKind::Ge : OpKind::Le;
  return n.emit(compare, {n.emit(OpKind::Sub, {col, row}), n.scalar(double(k), DType::I64)});
}

void register_tensor_ops(OpTable& t) {
  t["Reshape"] = map_reshape;
  t["Transpose"] = map_transpose;
  t["Concat"] = [](N& n) {
    std::vector<Value*> in;
    for (size_t i = 0; i < n.num_inputs(); ++i) in.push_back(n.input(i));
    n.set_output(0, n.emit(OpKind::Concat, in, {{"dim", n.attr_int("axis", 0)}}));
  };
  t["Split"] = map_split;
  t["Slice"] = map_slice;
  t["Squeeze"] = [](N& n) { map_squeeze(n, false); };
  t["Unsqueeze"] = [](N& n) { map_squeeze(n, true); };
  t["Gather"] = [](N& n) { map_gather(n, false); };
  t["GatherElements"] = [](N& n) { map_gather(n, true); };
  t["Expand"] = [](N& n) {
    n.set_output(0, n.emit(OpKind::Expand, {n.input(0)}, {{"shape", n.sym_ints(1, "shape")}}));
  };
  t["Tile"] = map_tile;
  t["Pad"] = map_pad;
  t["DepthToSpace"] = [](N& n) { map_space_depth(n, true); };
  t["SpaceToDepth"] = [](N& n) { map_space_depth(n, false); };
  t["Shape"] = [](N& n) {
    const Shape& s = n.input_type(0).shape;
    const int64_t rank = int64_t(s.size());
    auto clampi = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    const int64_t b = clampi(n.attr_int("start", 0)), e = clampi(n.attr_int("end", rank));
    n.set_output(0, n.shape_value({DType::I64, false, Shape(s.begin() + b, s.begin() + std::max(b, e))}));
  };
  t["Size"] = [](N& n) {
    n.set_output(0, n.shape_value({DType::I64, true, {numel(n.input_type(0).shape)}}));
  };
  t["Constant"] = map_constant;
  t["ConstantOfShape"] = map_constant_of_shape;
  t["Range"] = map_range;
  t["Trilu"] = map_trilu;
  t["EyeLike"] = map_eye_like;
}

}  // namespace kiln::onnx::detail
