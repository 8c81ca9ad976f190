// Parses the text form (see text.h; the format is described in docs/ir.md).
#include "core/ir/text.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>

#include "core/support/error.h"

namespace kiln {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whole-string conversions; false when the text is not exactly one number of that kind.
bool to_int64(const std::string& s, int64_t* out) {
  auto res = std::from_chars(s.data(), s.data() + s.size(), *out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}
template <class F>
bool to_floating(const std::string& s, F* out) {
  // from_chars rejects a leading '+', which the printer never writes either.
  auto res = std::from_chars(s.data(), s.data() + s.size(), *out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

// Digits with an optional sign: an integer, even when too large to be one (then an error, not
// silently a float).
bool looks_integral(const std::string& s) {
  size_t start = !s.empty() && s[0] == '-' ? 1 : 0;
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
}

// Text of one list element and where it starts, for error positions.
struct Chunk {
  std::string text;
  size_t pos;
};

class Parser {
 public:
  explicit Parser(const std::string& text, size_t pos = 0) : text_(text), pos_(pos) {}

  Graph parse(std::string* name_out) {
    Graph graph = parse_one(name_out);
    skip();
    if (pos_ < text_.size()) fail("expected end of input after the graph");
    return graph;
  }

 private:
  // One `graph @name(...) { ... }`, leaving the position after its closing brace.
  Graph parse_one(std::string* name_out) {
    expect_word("graph");
    expect('@', "before the graph name");
    std::string name = word("a graph name");
    if (name_out) *name_out = name;
    expect('(', "to open the graph inputs");
    if (!eat(')')) {
      do {
        size_t at = here();
        std::string id = ref_name();
        expect(':', "after the input's value id");
        TensorType type = parse_type();
        std::string value_name = at_char('"') ? string_literal() : "";
        define(id, at, graph_.add_input(type, value_name));
      } while (eat(','));
      expect(')', "after the graph inputs");
    }
    if (eat_word("symbols")) parse_symbols();
    expect('{', "to open the graph body");
    while (!at_word("return")) parse_node();
    expect_word("return");
    std::vector<Value*> outputs;
    if (!at_char('}')) {
      do outputs.push_back(use_ref());
      while (eat(','));
    }
    graph_.set_outputs(std::move(outputs));
    expect('}', "to close the graph body");
    apply_hints();
    return std::move(graph_);
  }

  // A subgraph attribute (a loop's condition or body): a graph of its own, with its own values.
  std::shared_ptr<const Graph> parse_subgraph() {
    Parser nested(text_, pos_);
    auto graph = std::make_shared<const Graph>(nested.parse_one(nullptr));
    pos_ = nested.pos_;
    return graph;
  }

  // ---- errors and positions
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    std::string got = "end of input";
    if (pos < text_.size()) {
      size_t end = pos;
      while (end < text_.size() && end - pos < 16 && !std::isspace(static_cast<unsigned char>(text_[end])))
        ++end;
      got = "'" + text_.substr(pos, std::max(end, pos + 1) - pos) + "'";
    }
    throw Error("graph text " + std::to_string(line) + ":" + std::to_string(col) + ": " + what +
                ", got " + got);
  }
  [[noreturn]] void fail(const std::string& what) {
    skip();
    fail_at(pos_, what);
  }

  // ---- characters and words
  void skip() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }
  size_t here() {
    skip();
    return pos_;
  }
  bool at_char(char c) {
    skip();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool eat(char c) {
    if (!at_char(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const std::string& why) {
    if (!eat(c)) fail(std::string("expected '") + c + "' " + why);
  }
  size_t word_end(size_t from) const {
    size_t end = from;
    if (end < text_.size() && is_ident_start(text_[end]))
      while (end < text_.size() && is_ident_char(text_[end])) ++end;
    return end;
  }
  bool at_word(const std::string& w) {
    skip();
    return word_end(pos_) - pos_ == w.size() && text_.compare(pos_, w.size(), w) == 0;
  }
  bool eat_word(const std::string& w) {
    if (!at_word(w)) return false;
    pos_ += w.size();
    return true;
  }
  void expect_word(const std::string& w) {
    if (!eat_word(w)) fail("expected '" + w + "'");
  }
  std::string word(const std::string& what) {
    skip();
    size_t end = word_end(pos_);
    if (end == pos_) fail("expected " + what);
    std::string w = text_.substr(pos_, end - pos_);
    pos_ = end;
    return w;
  }

  std::string string_literal() {
    skip();
    if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string");
    size_t start = pos_++;
    std::string s;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail_at(start, "unterminated string");
      char c = text_[pos_++];
      if (c == '"') return s;
      if (c != '\\') {
        s += c;
        continue;
      }
      if (pos_ >= text_.size()) fail_at(start, "unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'x': {
          unsigned v = 0;
          auto res = std::from_chars(text_.data() + pos_,
                                     text_.data() + std::min(pos_ + 2, text_.size()), v, 16);
          if (res.ec != std::errc() || res.ptr != text_.data() + pos_ + 2)
            fail_at(pos_, "expected two hex digits after \\x");
          pos_ += 2;
          s += char(v);
          break;
        }
        default: fail_at(pos_ - 2, "expected an escape (\\\" \\\\ \\n \\t \\r \\xHH)");
      }
    }
  }

  // A number or bare word as written: digits, letters, '.', '+', '-' ("-1.5e+3", "-inf").
  std::string number_token() {
    skip();
    size_t end = pos_;
    while (end < text_.size() && (is_ident_char(text_[end]) || text_[end] == '.' ||
                                  text_[end] == '+' || text_[end] == '-'))
      ++end;
    std::string t = text_.substr(pos_, end - pos_);
    pos_ = end;
    return t;
  }

  // Elements of a bracketed list (the '[' already eaten), split at top-level commas so that
  // symbolic dims like max(s0,s1) stay whole. Stops at the end of the line: lists never span lines.
  std::vector<Chunk> list_chunks() {
    std::vector<Chunk> chunks;
    skip();
    if (eat(']')) return chunks;
    while (true) {
      while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
      size_t start = pos_;
      int depth = 0;
      while (pos_ < text_.size() && text_[pos_] != '\n' &&
             !(depth == 0 && (text_[pos_] == ',' || text_[pos_] == ']'))) {
        if (text_[pos_] == '(' && ++depth > 64) fail_at(pos_, "expression nests too deeply");
        if (text_[pos_] == ')') --depth;
        ++pos_;
      }
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail_at(pos_, "expected ']' to close the list");
      size_t end = pos_;
      while (end > start && (text_[end - 1] == ' ' || text_[end - 1] == '\t')) --end;
      if (end == start) fail_at(start, "expected a list element");
      chunks.push_back({text_.substr(start, end - start), start});
      if (text_[pos_++] == ']') return chunks;
    }
  }

  // ---- values
  std::string ref_name() {
    skip();
    if (!eat('%')) fail("expected a value id like %3");
    size_t end = pos_;
    while (end < text_.size() && is_ident_char(text_[end])) ++end;
    if (end == pos_) fail("expected a value id like %3");
    std::string id = text_.substr(pos_, end - pos_);
    pos_ = end;
    return id;
  }
  Value* use_ref() {
    size_t at = here();
    std::string id = ref_name();
    auto it = values_.find(id);
    if (it == values_.end()) fail_at(at, "unknown value %" + id + " (values must be defined before use)");
    return it->second;
  }
  void define(const std::string& id, size_t at, Value* v) {
    if (!values_.emplace(id, v).second) fail_at(at, "value %" + id + " is already defined");
  }

  // ---- types
  SymInt parse_dim(const Chunk& c) {
    int64_t v;
    if (to_int64(c.text, &v)) {
      if (v < 0) fail_at(c.pos, "expected a dimension >= 0");
      return v;
    }
    // parse_symint bounds its own nesting, so hostile text cannot exhaust the stack.
    try {
      return parse_symint(c.text);
    } catch (const std::exception& e) {
      fail_at(c.pos, std::string("expected a dimension (an integer or symbolic expression): ") + e.what());
    }
  }
  DType parse_dtype_word() {
    size_t at = here();
    std::string name = word("a dtype (f32, f16, bf16, f64, i32, i64, u8, bool)");
    DType d;
    if (!parse_dtype(name, &d)) fail_at(at, "expected a dtype (f32, f16, bf16, f64, i32, i64, u8, bool)");
    return d;
  }
  TensorType parse_type() {
    TensorType t;
    t.dtype = parse_dtype_word();
    if (pos_ >= text_.size() || text_[pos_] != '[') fail("expected '[' right after the dtype");
    ++pos_;
    for (const Chunk& c : list_chunks()) {
      t.shape.push_back(parse_dim(c));
      // An expression of constants folds here: `1-6` is a dimension of -5, refused as -5 would be.
      if (t.shape.back().is_static() && t.shape.back().value() < 0)
        fail_at(c.pos, "expected a dimension >= 0, '" + c.text + "' is " + t.shape.back().str());
    }
    return t;
  }

  // ---- attributes
  Attr parse_attr_value() {
    size_t at = here();
    if (at_char('"')) return string_literal();
    if (eat('[')) return parse_list(list_chunks());
    if (eat_word("dense")) return parse_literal();
    if (eat_word("true")) return true;
    if (eat_word("false")) return false;
    if (at_word("graph")) return parse_subgraph();
    if (pos_ < text_.size() && is_ident_start(text_[pos_]) && !at_word("inf") && !at_word("nan")) {
      DType d;
      if (parse_dtype(word("a value"), &d)) return d;
      fail_at(at, "expected an attribute value (number, string, list, dtype, true/false, dense<...>, graph @name(...) {...})");
    }
    std::string t = number_token();
    int64_t i;
    double f;
    if (to_int64(t, &i)) return i;
    if (looks_integral(t)) fail_at(at, "expected an integer within i64 range");
    if (to_floating(t, &f)) return f;
    fail_at(at, "expected an attribute value (number, string, list, dtype, true/false, dense<...>, graph @name(...) {...})");
  }

  // Ints unless an element is a float; syms when an element is symbolic. Empty lists and
  // all-static syms read as ints; coerce_attrs then gives them the op's declared type.
  Attr parse_list(const std::vector<Chunk>& chunks) {
    bool all_int = true, any_float = false;
    for (const Chunk& c : chunks) {
      int64_t i;
      double f;
      if (to_int64(c.text, &i)) continue;
      if (looks_integral(c.text)) fail_at(c.pos, "expected an integer within i64 range");
      all_int = false;
      if (to_floating(c.text, &f)) any_float = true;
    }
    if (all_int || any_float) {
      std::vector<int64_t> ints;
      std::vector<double> floats;
      for (const Chunk& c : chunks) {
        int64_t i;
        double f;
        if (to_int64(c.text, &i)) ints.push_back(i), floats.push_back(double(i));
        else if (to_floating(c.text, &f)) floats.push_back(f);
        else fail_at(c.pos, "expected a number in this float list");
      }
      if (all_int) return ints;
      return floats;
    }
    std::vector<SymInt> syms;
    for (const Chunk& c : chunks) {
      int64_t i;
      if (to_int64(c.text, &i)) syms.push_back(i);
      else syms.push_back(parse_dim(c));
    }
    return syms;
  }

  Attr parse_literal() {
    expect('<', "after 'dense'");
    auto lit = std::make_shared<Literal>();
    lit->dtype = parse_dtype_word();
    expect('[', "after the literal's dtype");
    int64_t numel = 1;
    for (const Chunk& c : list_chunks()) {
      int64_t d;
      if (!to_int64(c.text, &d) || d < 0) fail_at(c.pos, "expected a static dimension >= 0");
      lit->shape.push_back(d);
      if (d != 0 && numel > (int64_t(1) << 40) / d) fail_at(c.pos, "literal is too large");
      numel *= d;
    }
    expect('>', "to close dense<...>");
    size_t at = here();
    expect('[', "to open the literal's values");
    std::vector<Chunk> chunks = list_chunks();
    if (int64_t(chunks.size()) != numel)
      fail_at(at, "expected " + std::to_string(numel) + " values for a literal of shape " +
                      shape_str(make_shape(lit->shape)) + " (" + std::to_string(chunks.size()) +
                      " given)");
    size_t size = dtype_size(lit->dtype);
    lit->bytes.resize(chunks.size() * size);
    visit_dtype(lit->dtype, [&]<class T>() {
      for (size_t i = 0; i < chunks.size(); ++i) {
        T v = parse_element<T>(chunks[i]);
        std::memcpy(lit->bytes.data() + i * size, &v, size);
      }
    });
    return std::shared_ptr<const Literal>(std::move(lit));
  }

  template <class T>
  T parse_element(const Chunk& c) {
    const std::string& s = c.text;
    if constexpr (std::is_same_v<T, bool>) {
      if (s == "true") return true;
      if (s == "false") return false;
      fail_at(c.pos, "expected true or false");
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      uint64_t v;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc() || end != s.data() + s.size())
        fail_at(c.pos, "expected an integer in the range of the literal's dtype");
      return v;
    } else if constexpr (std::is_integral_v<T>) {
      int64_t v;
      if (!to_int64(s, &v) || v < int64_t(std::numeric_limits<T>::min()) ||
          v > int64_t(std::numeric_limits<T>::max()))
        fail_at(c.pos, "expected an integer in the range of the literal's dtype");
      return T(v);
    } else {
      if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        // Raw bits, as the printer writes NaNs with a payload.
        using Bits = std::conditional_t<sizeof(T) == 2, uint16_t,
                                        std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
        Bits bits;
        auto res = std::from_chars(s.data() + 2, s.data() + s.size(), bits, 16);
        if (res.ec != std::errc() || res.ptr != s.data() + s.size())
          fail_at(c.pos, "expected hex bits that fit the literal's dtype");
        T v;
        std::memcpy(static_cast<void*>(&v), &bits, sizeof(T));
        return v;
      }
      if constexpr (std::is_same_v<T, double>) {
        double v;
        if (!to_floating(s, &v)) fail_at(c.pos, "expected a number");
        return v;
      } else {
        float v;  // f32 directly (no double rounding); f16/bf16 values are exact floats
        if (!to_floating(s, &v)) fail_at(c.pos, "expected a number");
        return T(v);
      }
    }
  }

  // Gives written attributes the op's declared type where the text cannot say it: [] and
  // all-static syms read as ints, ints where floats are declared. The same conversions
  // complete_attrs accepts, so no information is lost.
  static AttrMap coerce_attrs(OpKind kind, const AttrMap& written) {
    const OpDef* def = nullptr;
    try {
      def = &op_def(kind);
    } catch (const Error&) {
      return written;  // an op without a definition: keep the attributes as read
    }
    AttrMap out;
    for (const auto& [name, value] : written) {
      Attr v = value;
      for (const AttrSpec& spec : def->attrs) {
        if (spec.name != name) continue;
        if (auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
          if (spec.type == AttrType::Syms) v = std::vector<SymInt>(ints->begin(), ints->end());
          else if (spec.type == AttrType::Floats) v = std::vector<double>(ints->begin(), ints->end());
        } else if (auto* i = std::get_if<int64_t>(&v); i && spec.type == AttrType::Float) {
          v = double(*i);
        }
      }
      out.set(name, std::move(v));
    }
    return out;
  }

  // ---- provenance
  Origin parse_origin() {
    Origin o;
    if (eat_word("unknown")) return o;
    bool any = false;
    if (at_char('"')) {
      std::string s = string_literal();
      any = true;
      if (eat(':')) {
        o.file = s;
        size_t at = here();
        int64_t line;
        if (!to_int64(number_token(), &line) || line < 0 || line > std::numeric_limits<int>::max())
          fail_at(at, "expected a line number after ':'");
        o.line = int(line);
        if (at_char('"')) o.function = string_literal();
      } else {
        o.function = s;
      }
    }
    while (true) {
      if (eat_word("scope")) {
        expect('=', "after 'scope'");
        o.scope = string_literal();
      } else if (eat_word("imported")) {
        expect('=', "after 'imported'");
        o.imported = string_literal();
      } else if (eat_word("grad")) {
        expect('=', "after 'grad'");
        o.gradient_of = string_literal();
      } else {
        break;
      }
      any = true;
    }
    if (!any) fail("expected an origin: \"file\":line, \"function\", scope=\"...\", imported=\"...\", grad=\"...\" or unknown");
    return o;
  }
  Provenance parse_loc() {
    Provenance p;
    expect('(', "after 'loc'");
    do p.origins.push_back(parse_origin());
    while (eat(','));
    expect(')', "to close loc(...)");
    return p;
  }

  // ---- symbol hints: symbols(s0=8, s1=5)
  void parse_symbols() {
    expect('(', "after 'symbols'");
    if (!eat(')')) {
      do {
        size_t at = here();
        std::string sym = word("a symbol name");
        if (hints_.count(sym)) fail_at(at, "symbol '" + sym + "' is given twice");
        expect('=', "after the symbol name");
        size_t value_at = here();
        int64_t hint;
        if (!to_int64(number_token(), &hint)) fail_at(value_at, "expected the symbol's integer value");
        hints_[sym] = hint;
      } while (eat(','));
      expect(')', "to close symbols(...)");
    }
  }
  // Dims were read before the symbols clause; read them again with the hints (their printed
  // text always parses). The hint must then evaluate: `s0 % s1` with s1's hint 0 would fail in
  // every later pass and in the printer, so it is refused here.
  SymInt rehint(const SymInt& d) {
    if (d.is_static()) return d;
    SymInt with_hints = hints_.empty() ? d : parse_symint(d.str(), hints_);
    try {
      (void)with_hints.hint();
    } catch (const Error& e) {
      fail("dim '" + d.str() + "' has no value at the symbols' hints: " + e.what());
    }
    return with_hints;
  }
  void apply_hints() {
    for (const auto& v : graph_.values())
      for (SymInt& d : v->type.shape) d = rehint(d);
    for (Node* n : graph_.nodes()) {
      AttrMap attrs = n->attrs;
      for (const auto& [name, attr] : n->attrs) {
        if (auto* syms = std::get_if<std::vector<SymInt>>(&attr)) {
          std::vector<SymInt> fixed;
          for (const SymInt& d : *syms) fixed.push_back(rehint(d));
          attrs.set(name, fixed);
        }
      }
      n->attrs = attrs;
    }
  }

  // ---- nodes
  void parse_node() {
    struct Result {
      std::string id;
      size_t pos;
      TensorType type;
      std::string name;
    };
    std::vector<Result> results;
    if (at_char('%')) {
      do {
        size_t at = here();
        results.push_back({ref_name(), at, {}, {}});
      } while (eat(','));
      expect(':', "after the result ids");
      for (size_t i = 0; i < results.size(); ++i) {
        if (i) expect(',', "between result types (" + std::to_string(results.size()) + " results)");
        results[i].type = parse_type();
        if (at_char('"')) results[i].name = string_literal();
      }
      if (at_char(','))
        fail("expected '=' after " + std::to_string(results.size()) + " result types (more types than ids)");
      expect('=', "after the result types");
    }
    size_t op_at = here();
    if (pos_ >= text_.size() || !is_ident_start(text_[pos_]))
      fail("expected a node (%id: type = op(...)) or 'return'");
    std::string op = word("an op name");
    auto kind = find_op(op);
    if (!kind) fail_at(op_at, "unknown op '" + op + "'");
    expect('(', "after the op name");
    std::vector<Value*> inputs;
    if (!eat(')')) {
      do inputs.push_back(use_ref());
      while (eat(','));
      expect(')', "after the operands");
    }
    AttrMap attrs;
    if (eat('{')) {
      do {
        size_t at = here();
        std::string name = word("an attribute name");
        if (attrs.has(name)) fail_at(at, "attribute '" + name + "' is given twice");
        expect('=', "after the attribute name");
        attrs.set(name, parse_attr_value());
      } while (eat(','));
      expect('}', "to close the attributes");
    }
    Provenance where;
    if (eat_word("loc")) where = parse_loc();

    std::vector<TensorType> types;
    for (const Result& r : results) types.push_back(r.type);
    // Check all ids before adding the node so an error leaves no half-built node behind.
    for (size_t i = 0; i < results.size(); ++i) {
      if (values_.count(results[i].id)) fail_at(results[i].pos, "value %" + results[i].id + " is already defined");
      for (size_t j = 0; j < i; ++j)
        if (results[j].id == results[i].id) fail_at(results[i].pos, "value %" + results[i].id + " is already defined");
    }
    Node* n = graph_.add_node_typed(*kind, inputs, coerce_attrs(*kind, attrs), types, where);
    for (size_t i = 0; i < results.size(); ++i) {
      n->outputs[i]->name = results[i].name;
      define(results[i].id, results[i].pos, n->outputs[i]);
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
  Graph graph_;
  std::map<std::string, Value*> values_;
  std::map<std::string, int64_t> hints_;
};

}  // namespace

Graph parse_graph(const std::string& text, std::string* name) { return Parser(text).parse(name); }

}  // namespace kiln
