// The op table: built once from the family files, plus attribute completion and type inference.
#include "core/ir/op.h"

#include <array>

#include "core/support/error.h"

namespace kiln {
namespace {

struct OpNameEntry {
  std::string_view name;
  OpFamily family;
};

constexpr std::array<OpNameEntry, kOpCount> kOpNames = {{
#define KILN_OP(e, name, family) {name, OpFamily::family},
#include "core/ir/op_list.def"
#undef KILN_OP
}};

struct OpTable {
  std::vector<OpDef> defs;       // indexed by OpKind
  std::vector<bool> defined;

  OpTable() : defs(kOpCount), defined(kOpCount, false) {
    std::vector<OpDef> all;
    ops::define_unary(all);
    ops::define_binary(all);
    ops::define_reduce(all);
    ops::define_linalg(all);
    ops::define_conv(all);
    ops::define_winograd(all);
    ops::define_norm(all);
    ops::define_shape(all);
    ops::define_control(all);
    for (OpDef& d : all) {
      size_t i = size_t(d.kind);
      d.name = kOpNames[i].name;
      d.family = kOpNames[i].family;
      defined[i] = true;
      defs[i] = std::move(d);
    }
    ops::define_pointwise_grads(defs);
    ops::define_reduce_grads(defs);
    ops::define_linalg_grads(defs);
    ops::define_conv_grads(defs);
    ops::define_conv_expansions(defs);
    ops::define_shape_expansions(defs);
    ops::define_norm_grads(defs);
    ops::define_shape_grads(defs);
  }
};

const OpTable& table() {
  static const OpTable t;
  return t;
}

}  // namespace

std::string_view op_name(OpKind kind) { return kOpNames[size_t(kind)].name; }

const OpDef& op_def(OpKind kind) {
  const OpTable& t = table();
  if (!t.defined[size_t(kind)])
    throw Error("op '" + std::string(op_name(kind)) + "' is not implemented yet (no op definition)");
  return t.defs[size_t(kind)];
}

std::optional<OpKind> find_op(std::string_view name) {
  for (size_t i = 0; i < kOpCount; ++i)
    if (kOpNames[i].name == name) return OpKind(i);
  return std::nullopt;
}

std::string op_error(OpKind kind, const std::vector<TensorType>& inputs, const Provenance& where,
                     const std::string& why) {
  std::string s = "op '" + std::string(op_name(kind)) + "' (";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s += ", ";
    s += inputs[i].str();
  }
  s += ")";
  if (!where.empty()) s += " at " + where.str();
  return s + ": " + why;
}

int64_t InferContext::axis(int64_t axis, int64_t rank) const {
  try {
    return normalize_axis(axis, rank, "axis");
  } catch (const Error& e) {
    fail(e.what());
  }
}

void InferContext::fail(const std::string& why) const {
  throw Error(op_error(kind_, inputs_, where_, why));
}

AttrMap complete_attrs(OpKind kind, const AttrMap& given, const Provenance& where) {
  const OpDef& def = op_def(kind);
  auto fail = [&](const std::string& why) { throw Error(op_error(kind, {}, where, why)); };
  AttrMap out;
  for (const auto& [name, value] : given) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : def.attrs)
      if (s.name == name) spec = &s;
    if (!spec) fail("unknown attribute '" + name + "'");
    Attr v = value;
    // Ints are accepted where floats are expected (clip(x, 0, 6)).
    if (spec->type == AttrType::Float && attr_type(v) == AttrType::Int)
      v = double(std::get<int64_t>(v));
    if (spec->type == AttrType::Floats && attr_type(v) == AttrType::Ints) {
      const auto& ints = std::get<std::vector<int64_t>>(v);
      v = std::vector<double>(ints.begin(), ints.end());
    }
    if (spec->type == AttrType::Syms && attr_type(v) == AttrType::Ints) {
      const auto& ints = std::get<std::vector<int64_t>>(v);
      v = std::vector<SymInt>(ints.begin(), ints.end());
    }
    if (attr_type(v) != spec->type)
      fail("attribute '" + name + "' must be " + attr_type_name(spec->type) + ", got " +
           attr_type_name(attr_type(value)));
    out.set(name, std::move(v));
  }
  for (const AttrSpec& s : def.attrs) {
    if (out.has(s.name)) continue;
    if (!s.default_value) fail("required attribute '" + s.name + "' is missing");
    out.set(s.name, *s.default_value);
  }
  return out;
}

std::vector<TensorType> infer_types(OpKind kind, const std::vector<TensorType>& inputs,
                                    const AttrMap& attrs, const Provenance& where,
                                    AttrMap* completed) {
  const OpDef& def = op_def(kind);
  int n = int(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                       : def.min_inputs == def.max_inputs
                           ? std::to_string(def.min_inputs)
                           : std::to_string(def.min_inputs) + ".." + std::to_string(def.max_inputs);
    throw Error(op_error(kind, inputs, where,
                         "takes " + want + " inputs, got " + std::to_string(n)));
  }
  AttrMap full = complete_attrs(kind, attrs, where);
  InferContext ctx(kind, inputs, full, where);
  std::vector<TensorType> types = def.infer(ctx);
  if (completed) *completed = std::move(full);
  return types;
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    bool has_a = i < a.size(), has_b = i < b.size();
    SymInt da = has_a ? a[a.size() - 1 - i] : SymInt(1);
    SymInt db = has_b ? b[b.size() - 1 - i] : SymInt(1);
    SymInt d;
    if (da.same_as(db)) d = da;
    else if (da.is_static() && da.value() == 1) d = db;
    else if (db.is_static() && db.value() == 1) d = da;
    else if (!da.is_static() || !db.is_static()) {
      // Different symbolic expressions: equal under the current hints is a shape decision.
      if (da != db) return std::nullopt;
      d = da.is_static() ? da : db;
    } else {
      return std::nullopt;
    }
    out[rank - 1 - i] = d;
  }
  return out;
}

}  // namespace kiln
