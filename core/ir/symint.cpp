// SymInt expressions: construction with local simplification, printing, evaluation, parsing.
#include "core/ir/symint.h"

#include <cctype>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/support/error.h"

namespace kiln {

struct SymExpr {
  enum class Kind { Symbol, Add, Sub, Mul, FloorDiv, Mod, Max } kind;
  std::string name;  // Symbol
  int64_t hint = 0;  // Symbol
  SymInt lhs, rhs;   // binary kinds
};

namespace {

[[noreturn]] void overflow(const char* op, int64_t a, int64_t b) {
  throw Error("symbolic shape: " + std::to_string(a) + " " + op + " " + std::to_string(b) +
              " is past int64's range");
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw Error("symbolic shape: division by zero");
  if (a == INT64_MIN && b == -1) overflow("//", a, b);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// a - floor_div(a, b) * b, without the product (which can pass int64's range).
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) throw Error("symbolic shape: division by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t apply(SymExpr::Kind kind, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (kind) {
    case SymExpr::Kind::Add:
      if (__builtin_add_overflow(a, b, &r)) overflow("+", a, b);
      return r;
    case SymExpr::Kind::Sub:
      if (__builtin_sub_overflow(a, b, &r)) overflow("-", a, b);
      return r;
    case SymExpr::Kind::Mul:
      if (__builtin_mul_overflow(a, b, &r)) overflow("*", a, b);
      return r;
    case SymExpr::Kind::FloorDiv: return floor_div(a, b);
    case SymExpr::Kind::Mod: return floor_mod(a, b);
    case SymExpr::Kind::Max: return a > b ? a : b;
    case SymExpr::Kind::Symbol: break;
  }
  return 0;
}

SymInt make_binary(SymExpr::Kind kind, const SymInt& a, const SymInt& b) {
  if (a.is_static() && b.is_static()) return apply(kind, a.value(), b.value());
  // Identities that keep printed shapes short.
  auto is = [](const SymInt& s, int64_t v) { return s.is_static() && s.value() == v; };
  switch (kind) {
    case SymExpr::Kind::Add:
      if (is(a, 0)) return b;
      if (is(b, 0)) return a;
      break;
    case SymExpr::Kind::Sub:
      if (is(b, 0)) return a;
      if (a.same_as(b)) return 0;
      break;
    case SymExpr::Kind::Mul:
      if (is(a, 1)) return b;
      if (is(b, 1)) return a;
      if (is(a, 0) || is(b, 0)) return 0;
      break;
    case SymExpr::Kind::FloorDiv:
      if (is(b, 1)) return a;
      break;
    case SymExpr::Kind::Mod:
      if (is(b, 1)) return 0;
      break;
    case SymExpr::Kind::Max:
      if (a.same_as(b)) return a;
      break;
    case SymExpr::Kind::Symbol: break;
  }
  auto e = std::make_shared<SymExpr>();
  e->kind = kind;
  e->lhs = a;
  e->rhs = b;
  return SymInt::from_expr(std::move(e));
}

int precedence(const SymInt& s) {
  if (s.is_static()) return s.value() < 0 ? 2 : 4;
  switch (s.expr()->kind) {
    case SymExpr::Kind::Add: case SymExpr::Kind::Sub: return 1;
    case SymExpr::Kind::Mul: case SymExpr::Kind::FloorDiv: case SymExpr::Kind::Mod: return 2;
    default: return 4;
  }
}

}  // namespace

SymInt SymInt::symbol(const std::string& name, int64_t hint) {
  auto e = std::make_shared<SymExpr>();
  e->kind = SymExpr::Kind::Symbol;
  e->name = name;
  e->hint = hint;
  return from_expr(std::move(e));
}

SymInt SymInt::from_expr(std::shared_ptr<const SymExpr> expr) {
  SymInt s;
  s.expr_ = std::move(expr);
  return s;
}

SymInt SymInt::with_origin(const std::source_location& loc) const {
  SymInt s = *this;
  s.origin_ = loc;
  return s;
}

int64_t SymInt::value() const {
  if (expr_) throw Error("dimension " + str() + " is symbolic; a static size was required here");
  return value_;
}

int64_t SymInt::hint() const {
  if (!expr_) return value_;
  if (expr_->kind == SymExpr::Kind::Symbol) return expr_->hint;
  return apply(expr_->kind, expr_->lhs.hint(), expr_->rhs.hint());
}

int64_t SymInt::evaluate(const std::map<std::string, int64_t>& bindings) const {
  if (!expr_) return value_;
  if (expr_->kind == SymExpr::Kind::Symbol) {
    auto it = bindings.find(expr_->name);
    if (it == bindings.end()) throw Error("symbolic shape: no value bound for symbol " + expr_->name);
    return it->second;
  }
  return apply(expr_->kind, expr_->lhs.evaluate(bindings), expr_->rhs.evaluate(bindings));
}

std::string SymInt::str() const {
  if (!expr_) return std::to_string(value_);
  const SymExpr& e = *expr_;
  if (e.kind == SymExpr::Kind::Symbol) return e.name;
  if (e.kind == SymExpr::Kind::Max) return "max(" + e.lhs.str() + "," + e.rhs.str() + ")";
  const char* op = e.kind == SymExpr::Kind::Add       ? "+"
                   : e.kind == SymExpr::Kind::Sub     ? "-"
                   : e.kind == SymExpr::Kind::Mul     ? "*"
                   : e.kind == SymExpr::Kind::FloorDiv ? "//"
                                                      : "%";
  int mine = precedence(*this);
  // Left operand needs parentheses only when it binds looser; right when looser or equal
  // (a-(b+c), a//(b*c)).
  std::string l = e.lhs.str(), r = e.rhs.str();
  if (precedence(e.lhs) < mine) l = "(" + l + ")";
  if (precedence(e.rhs) <= mine && !(e.rhs.is_static() && e.rhs.value() >= 0)) r = "(" + r + ")";
  return l + op + r;
}

SymInt operator+(const SymInt& a, const SymInt& b) { return make_binary(SymExpr::Kind::Add, a, b); }
SymInt operator-(const SymInt& a, const SymInt& b) { return make_binary(SymExpr::Kind::Sub, a, b); }
SymInt operator*(const SymInt& a, const SymInt& b) { return make_binary(SymExpr::Kind::Mul, a, b); }
SymInt operator/(const SymInt& a, const SymInt& b) {
  return make_binary(SymExpr::Kind::FloorDiv, a, b);
}
SymInt operator%(const SymInt& a, const SymInt& b) { return make_binary(SymExpr::Kind::Mod, a, b); }
SymInt sym_max(const SymInt& a, const SymInt& b) { return make_binary(SymExpr::Kind::Max, a, b); }

const char* guard_op_text(GuardOp op) {
  switch (op) {
    case GuardOp::Eq: return "==";
    case GuardOp::Ne: return "!=";
    case GuardOp::Lt: return "<";
    case GuardOp::Le: return "<=";
    case GuardOp::Gt: return ">";
    case GuardOp::Ge: return ">=";
  }
  return "?";
}

namespace {
thread_local GuardSink* g_guard_sink = nullptr;
}

GuardSink* current_guard_sink() { return g_guard_sink; }

bool decide(int64_t x, GuardOp op, int64_t y) {
  switch (op) {
    case GuardOp::Eq: return x == y;
    case GuardOp::Ne: return x != y;
    case GuardOp::Lt: return x < y;
    case GuardOp::Le: return x <= y;
    case GuardOp::Gt: return x > y;
    case GuardOp::Ge: return x >= y;
  }
  return false;
}
GuardSinkScope::GuardSinkScope(GuardSink* sink) : previous_(g_guard_sink) { g_guard_sink = sink; }
GuardSinkScope::~GuardSinkScope() { g_guard_sink = previous_; }

bool compare(const SymInt& a, GuardOp op, const SymInt& b) {
  // Identical expressions decide without a guard.
  if (!a.is_static() || !b.is_static()) {
    if (a.same_as(b)) return op == GuardOp::Eq || op == GuardOp::Le || op == GuardOp::Ge;
  }
  const bool result = decide(a.hint(), op, b.hint());
  if ((!a.is_static() || !b.is_static()) && g_guard_sink) {
    auto where = a.origin() ? a.origin() : b.origin();
    g_guard_sink->record(ShapeGuard{a, op, b, result, where});
  }
  return result;
}

namespace {

// Recursive-descent parser for the printed form.
class SymParser {
 public:
  SymParser(const std::string& text, const std::map<std::string, int64_t>& hints)
      : text_(text), hints_(hints) {}

  SymInt parse() {
    SymInt s = sum();
    skip();
    if (pos_ != text_.size()) fail("unexpected '" + text_.substr(pos_, 1) + "'");
    return s;
  }

 private:
  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool eat(const std::string& tok) {
    skip();
    if (text_.compare(pos_, tok.size(), tok) == 0) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }
  [[noreturn]] void fail(const std::string& why) {
    throw Error("bad symbolic dimension '" + text_ + "': " + why);
  }
  SymInt sum() {
    SymInt s = product();
    while (true) {
      if (eat("+")) s = s + product();
      else if (eat("-")) s = s - product();
      else return s;
    }
  }
  SymInt product() {
    SymInt s = atom();
    while (true) {
      if (eat("*")) s = s * atom();
      else if (eat("//")) s = s / atom();
      else if (eat("%")) s = s % atom();
      else return s;
    }
  }
  SymInt atom() {
    skip();
    if (pos_ >= text_.size()) fail("unexpected end");
    // Each '(' and unary '-' recurses: a bound keeps hostile text from exhausting the stack.
    if (++depth_ > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth));
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    if (eat("(")) {
      SymInt s = sum();
      if (!eat(")")) fail("missing ')'");
      return s;
    }
    if (eat("-")) {
      skip();
      // A literal keeps its sign, so the most negative int64 (as str() prints it) parses back.
      if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) return integer("-");
      return SymInt(0) - atom();
    }
    if (eat("max(")) {
      SymInt a = sum();
      if (!eat(",")) fail("max needs two arguments");
      SymInt b = sum();
      if (!eat(")")) fail("missing ')'");
      return sym_max(a, b);
    }
    char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) return integer("");
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
        ++end;
      std::string name = text_.substr(pos_, end - pos_);
      pos_ = end;
      auto it = hints_.find(name);
      return SymInt::symbol(name, it == hints_.end() ? 0 : it->second);
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  // The digits at pos_, with `sign` ("" or "-") before them.
  SymInt integer(const std::string& sign) {
    size_t end = pos_;
    while (end < text_.size() && std::isdigit(static_cast<unsigned char>(text_[end]))) ++end;
    const std::string digits = sign + text_.substr(pos_, end - pos_);
    int64_t v = 0;
    try {
      v = std::stoll(digits);
    } catch (const std::out_of_range&) {
      fail("integer " + digits + " is past int64's range");
    }
    pos_ = end;
    return v;
  }

  const std::string& text_;
  const std::map<std::string, int64_t>& hints_;
  size_t pos_ = 0;
  static constexpr int kMaxDepth = 200;
  int depth_ = 0;
};

}  // namespace

SymInt parse_symint(const std::string& text, const std::map<std::string, int64_t>& hints) {
  return SymParser(text, hints).parse();
}

}  // namespace kiln
