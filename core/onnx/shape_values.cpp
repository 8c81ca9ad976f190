// Shape arithmetic at import: the integer subgraphs exporters build from Shape (Gather a dim,
// Unsqueeze, Concat with constants, Div by the head count, ...) folded to SymInt expressions, so
// Reshape, Expand, Slice and ConstantOfShape get symbolic operands and one import serves every
// size of a dynamic axis.
#include <cstring>

#include "core/onnx/import_context.h"

namespace kiln::onnx::detail {
namespace {

int64_t exact_element(const Literal& lit, int64_t i) {
  if (lit.dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, lit.bytes.data() + size_t(i) * 8, 8);
    return v;
  }
  return int64_t(lit.element(i));
}

// numpy broadcasting between rank 0/1 operands: element i of an operand of length n.
const SymInt& at(const ShapeValues& v, size_t i) { return v.values.size() == 1 ? v.values[0] : v.values[i]; }

SymInt trunc_div(const SymInt& a, const SymInt& b) {
  if (a.is_static() && b.is_static()) return b.value() == 0 ? SymInt(0) : SymInt(a.value() / b.value());
  return a / b;  // sizes are non-negative: floor and truncation agree
}

std::optional<SymInt> binary(OpKind kind, const SymInt& a, const SymInt& b) {
  switch (kind) {
    case OpKind::Add: return a + b;
    case OpKind::Sub: return a - b;
    case OpKind::Mul: return a * b;
    case OpKind::Div: return trunc_div(a, b);
    case OpKind::Mod: return a % b;
    case OpKind::Maximum: return sym_max(a, b);
    case OpKind::Minimum: return a + b - sym_max(a, b);
    case OpKind::Eq: return SymInt(int64_t(a == b));
    case OpKind::Ne: return SymInt(int64_t(a != b));
    case OpKind::Lt: return SymInt(int64_t(a < b));
    case OpKind::Le: return SymInt(int64_t(a <= b));
    case OpKind::Gt: return SymInt(int64_t(a > b));
    case OpKind::Ge: return SymInt(int64_t(a >= b));
    default: return std::nullopt;
  }
}

// ONNX Slice of a 1-d list of length n by static bounds (numpy semantics).
std::optional<std::vector<SymInt>> slice_list(const std::vector<SymInt>& list, const AttrMap& attrs) {
  const auto& starts = attrs.get_syms("starts");
  const auto& ends = attrs.get_syms("ends");
  const auto& steps = attrs.get_ints("steps");
  if (starts.size() != 1 || ends.size() != 1 || !starts[0].is_static() || !ends[0].is_static())
    return std::nullopt;
  const int64_t n = int64_t(list.size()), step = steps.empty() ? 1 : steps[0];
  if (step == 0) return std::nullopt;
  auto bound = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v = v == kSliceOpenBegin ? lo : v + n;
    return std::clamp(v, lo, hi);
  };
  std::vector<SymInt> out;
  if (step > 0) {
    for (int64_t i = bound(starts[0].value(), 0, n), e = bound(ends[0].value(), 0, n); i < e; i += step)
      out.push_back(list[size_t(i)]);
  } else {
    for (int64_t i = bound(starts[0].value(), -1, n - 1), e = bound(ends[0].value(), -1, n - 1); i > e;
         i += step)
      out.push_back(list[size_t(i)]);
  }
  return out;
}

std::optional<std::vector<SymInt>> fold_values(OpKind kind, const std::vector<ShapeValues>& in,
                                               const AttrMap& attrs, size_t count) {
  switch (kind) {
    case OpKind::Reshape:
      return in[0].values;
    case OpKind::Expand:
      if (in[0].values.size() == count) return in[0].values;
      if (in[0].values.size() != 1) return std::nullopt;
      return std::vector<SymInt>(count, in[0].values[0]);
    case OpKind::Cast:
      return in[0].values;
    case OpKind::Concat: {
      std::vector<SymInt> out;
      for (const ShapeValues& v : in) out.insert(out.end(), v.values.begin(), v.values.end());
      return out;
    }
    case OpKind::IndexSelect:
    case OpKind::Gather: {
      std::vector<SymInt> out;
      for (const SymInt& i : in[1].values) {
        if (!i.is_static()) return std::nullopt;
        int64_t k = i.value() < 0 ? i.value() + int64_t(in[0].values.size()) : i.value();
        if (k < 0 || k >= int64_t(in[0].values.size())) return std::nullopt;  // the op says why
        out.push_back(in[0].values[size_t(k)]);
      }
      return out;
    }
    case OpKind::Slice:
      return slice_list(in[0].values, attrs);
    case OpKind::Neg: {
      std::vector<SymInt> out;
      for (const SymInt& v : in[0].values) out.push_back(SymInt(0) - v);
      return out;
    }
    case OpKind::Where: {
      std::vector<SymInt> out;
      for (size_t i = 0; i < count; ++i) {
        const SymInt& c = at(in[0], i);
        if (!c.is_static()) return std::nullopt;
        out.push_back(c.value() ? at(in[1], i) : at(in[2], i));
      }
      return out;
    }
    default: {
      if (in.size() != 2) return std::nullopt;
      std::vector<SymInt> out;
      for (size_t i = 0; i < count; ++i) {
        std::optional<SymInt> r = binary(kind, at(in[0], i), at(in[1], i));
        if (!r) return std::nullopt;
        out.push_back(*r);
      }
      return out;
    }
  }
}

}  // namespace

std::optional<ShapeValues> shape_values_of(const Value* v) {
  if (!v || !v->producer) return std::nullopt;
  const Node& node = *v->producer;
  if (node.kind == OpKind::SymInts)
    return ShapeValues{node.attrs.get_dtype("dtype"), node.attrs.get_bool("scalar"),
                       node.attrs.get_syms("values")};
  const Literal* lit = constant_of(v);
  if (!lit || lit->shape.size() > 1 || lit->numel() > kInlineConstantLimit ||
      is_floating(lit->dtype))
    return std::nullopt;
  ShapeValues out{lit->dtype, lit->shape.empty(), {}};
  for (int64_t i = 0; i < lit->numel(); ++i) out.values.push_back(exact_element(*lit, i));
  return out;
}

std::optional<ShapeValues> fold_shape_values(OpKind kind, const std::vector<ShapeValues>& inputs,
                                             const AttrMap& attrs, const TensorType& out) {
  if (out.rank() > 1 || !is_static(out.shape) || is_floating(out.dtype)) return std::nullopt;
  const size_t count = size_t(numel(out.shape).value());
  std::optional<std::vector<SymInt>> values = fold_values(kind, inputs, attrs, count);
  if (!values || values->size() != count) return std::nullopt;
  if (out.dtype == DType::Bool)  // a bool keeps 0/1; a symbolic value has no truth yet
    for (SymInt& v : *values) {
      if (!v.is_static()) return std::nullopt;
      v = SymInt(int64_t(v.value() != 0));
    }
  return ShapeValues{out.dtype, out.rank() == 0, std::move(*values)};
}

}  // namespace kiln::onnx::detail
