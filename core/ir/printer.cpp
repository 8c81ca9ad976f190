// Text form of a graph (see text.h; the format is described in docs/ir.md).
#include "core/ir/text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace kiln {
namespace {

// Shortest text that parses back to the same double; always looks like a float ("2.0", "1e+20",
// "inf", "nan") so the parser never mistakes it for an int.
std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

// A float32 printed by its own shortest form: 0.1f reads "0.1", not "0.10000000149011612".
std::string format_float(float v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

template <class T>
std::string format_hex_bits(const T& v) {
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t,
                                  std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  Bits bits;
  std::memcpy(&bits, &v, sizeof(T));
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), bits, 16);
  return "0x" + std::string(buf, res.ptr);
}

// One element of a literal. Floats print their exact value (f16/bf16 values are exact floats);
// a NaN whose bits differ from the parser's `nan` prints as raw bits so the bytes round-trip.
template <class T>
std::string format_element(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    double d = double(compute_t<T>(v));
    if (std::isnan(d)) {
      T canonical;
      if constexpr (std::is_same_v<T, double>) canonical = std::numeric_limits<double>::quiet_NaN();
      else canonical = T(std::numeric_limits<float>::quiet_NaN());
      if (std::memcmp(&v, &canonical, sizeof(T)) == 0) return "nan";
      return format_hex_bits(v);
    }
    if constexpr (std::is_same_v<T, double>) return format_double(v);
    else return format_float(float(v));
  }
}

std::string format_literal(const Literal& lit) {
  std::string s = "dense<" + std::string(dtype_name(lit.dtype)) + "[";
  for (size_t i = 0; i < lit.shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(lit.shape[i]);
  }
  s += "]>[";
  size_t size = dtype_size(lit.dtype);
  // A literal with the wrong byte count is a verifier matter; print the whole elements it holds.
  size_t n = lit.bytes.size() / size;
  visit_dtype(lit.dtype, [&]<class T>() {
    for (size_t i = 0; i < n; ++i) {
      if (i) s += ",";
      T v;
      std::memcpy(&v, lit.bytes.data() + i * size, size);
      s += format_element(v);
    }
  });
  return s + "]";
}

template <class T, class F>
std::string format_list(const std::vector<T>& items, F&& format) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ",";
    s += format(items[i]);
  }
  return s + "]";
}

std::string format_origin(const Origin& o) {
  std::string s;
  auto add = [&](const std::string& part) {
    if (!s.empty()) s += " ";
    s += part;
  };
  if (!o.file.empty() || o.line != 0) add(quote_string(o.file) + ":" + std::to_string(o.line));
  if (!o.function.empty()) add(quote_string(o.function));
  if (!o.scope.empty()) add("scope=" + quote_string(o.scope));
  if (!o.imported.empty()) add("imported=" + quote_string(o.imported));
  if (!o.gradient_of.empty()) add("grad=" + quote_string(o.gradient_of));
  return s.empty() ? "unknown" : s;
}

// Dense renumbering: graph inputs, then node outputs in order; values used but never defined
// (an invalid graph) get the next numbers as they are met, so such a graph still prints.
class ValueNumbers {
 public:
  explicit ValueNumbers(const Graph& g) {
    for (const Value* v : g.inputs()) define(v);
    for (const Node* n : g.nodes())
      for (const Value* v : n->outputs) define(v);
  }
  std::string ref(const Value* v) {
    if (!v) return "%null";
    define(v);
    return "%" + std::to_string(numbers_[v]);
  }

 private:
  void define(const Value* v) {
    if (v && !numbers_.count(v)) numbers_[v] = next_++;
  }
  std::map<const Value*, int> numbers_;
  int next_ = 0;
};

bool is_symbol_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// The traced value of each symbol that appears as a whole dim. A SymInt does not expose the
// symbols inside a compound expression, so a symbol seen only as s0*2 keeps no hint in text.
std::map<std::string, int64_t> symbol_hints(const Graph& g) {
  std::map<std::string, int64_t> hints;
  auto note = [&](const SymInt& d) {
    if (!d.is_static() && d.hint() != 0 && is_symbol_name(d.str())) hints[d.str()] = d.hint();
  };
  auto note_value = [&](const Value* v) {
    if (v)
      for (const SymInt& d : v->type.shape) note(d);
  };
  for (const Value* v : g.inputs()) note_value(v);
  for (const Node* n : g.nodes()) {
    for (const Value* v : n->outputs) note_value(v);
    for (const auto& [name, attr] : n->attrs)
      if (auto* syms = std::get_if<std::vector<SymInt>>(&attr))
        for (const SymInt& d : *syms) note(d);
  }
  return hints;
}

std::string format_typed_value(const std::string& ref, const Value* v) {
  std::string s = ref;
  if (v) s += ": " + v->type.str();
  if (v && !v->name.empty()) s += " " + quote_string(v->name);
  return s;
}

// A subgraph inside a node's attributes: its own text, indented under the node, with its own value
// numbers (a subgraph reads only its inputs).
std::string nested_graph(const Graph& graph, std::string_view name) {
  const std::string text = print_graph(graph, name);
  std::string s;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    s += text[i];
    if (text[i] == '\n') s += "    ";
  }
  return s;
}

}  // namespace

std::string quote_string(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string s = "\"";
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      case '\t': s += "\\t"; break;
      case '\r': s += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          s += "\\x";
          s += kHex[u >> 4];
          s += kHex[u & 15];
        } else {
          s += c;  // printable ASCII and UTF-8 bytes as they are
        }
    }
  }
  return s + "\"";
}

std::string print_attr(const Attr& attr) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(v);
        else if constexpr (std::is_same_v<T, double>) return format_double(v);
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return quote_string(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return format_list(v, [](int64_t i) { return std::to_string(i); });
        else if constexpr (std::is_same_v<T, std::vector<double>>)
          return format_list(v, format_double);
        else if constexpr (std::is_same_v<T, std::vector<SymInt>>)
          return format_list(v, [](const SymInt& d) { return d.str(); });
        else if constexpr (std::is_same_v<T, DType>) return std::string(dtype_name(v));
        else if constexpr (std::is_same_v<T, std::shared_ptr<const Graph>>)
          return v ? nested_graph(*v, "graph") : std::string("graph<null>");
        else return v ? format_literal(*v) : std::string("dense<null>");
      },
      attr);
}

std::string print_provenance(const Provenance& p) {
  if (p.empty()) return "";
  std::string s = "loc(";
  for (size_t i = 0; i < p.origins.size(); ++i) {
    if (i) s += ", ";
    s += format_origin(p.origins[i]);
  }
  return s + ")";
}

std::string print_graph(const Graph& graph, std::string_view name) {
  ValueNumbers numbers(graph);
  std::string s = "graph @" + std::string(name) + "(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* v = graph.inputs()[i];
    if (i) s += ", ";
    s += format_typed_value(numbers.ref(v), v);
  }
  s += ")";
  std::map<std::string, int64_t> hints = symbol_hints(graph);
  if (!hints.empty()) {
    s += " symbols(";
    bool first = true;
    for (const auto& [sym, hint] : hints) {
      s += (first ? "" : ", ") + sym + "=" + std::to_string(hint);
      first = false;
    }
    s += ")";
  }
  s += " {\n";
  for (const Node* n : graph.nodes()) {
    s += "  ";
    if (!n->outputs.empty()) {
      // "%5, %6: f32[2], f32[3] = split(...)": ids first, then their types (and names).
      for (size_t i = 0; i < n->outputs.size(); ++i) s += (i ? ", " : "") + numbers.ref(n->outputs[i]);
      s += ": ";
      for (size_t i = 0; i < n->outputs.size(); ++i) {
        const Value* v = n->outputs[i];
        if (i) s += ", ";
        s += v ? v->type.str() : "?";
        if (v && !v->name.empty()) s += " " + quote_string(v->name);
      }
      s += " = ";
    }
    s += std::string(op_name(n->kind)) + "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) s += (i ? ", " : "") + numbers.ref(n->inputs[i]);
    s += ")";
    if (n->attrs.size()) {
      s += " {";
      bool first = true;
      for (const auto& [attr_name, value] : n->attrs) {
        const auto* sub = std::get_if<std::shared_ptr<const Graph>>(&value);
        s += (first ? "" : ", ") + attr_name + "=" + (sub && *sub ? nested_graph(**sub, attr_name) : print_attr(value));
        first = false;
      }
      s += "}";
    }
    if (!n->provenance.empty()) s += " " + print_provenance(n->provenance);
    s += "\n";
  }
  s += "  return";
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    s += (i ? ", " : " ") + numbers.ref(graph.outputs()[i]);
  return s + "\n}\n";
}

}  // namespace kiln
