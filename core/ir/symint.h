// SymInt: a dimension that is either a known integer or a small integer expression over symbols
// (s0, s0*4, (s1+2)//2). Comparing a symbolic SymInt decides by the symbol's current value (its
// hint) and reports the decision to the active GuardSink, so a compiled graph can re-check it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>

namespace kiln {

struct SymExpr;  // immutable expression node, shared

class SymInt {
 public:
  SymInt() = default;
  SymInt(int64_t value) : value_(value) {}  // NOLINT: a plain integer is a SymInt
  SymInt(int value) : value_(value) {}      // NOLINT

  // A new symbol named `name` whose value while tracing is `hint`.
  static SymInt symbol(const std::string& name, int64_t hint);

  bool is_static() const { return expr_ == nullptr; }
  // The integer; throws kiln::Error for a symbolic dim.
  int64_t value() const;
  // The integer for static dims, the traced value for symbolic ones.
  int64_t hint() const;
  std::string str() const;
  // Substitutes symbol values; a symbol missing from `bindings` throws kiln::Error.
  int64_t evaluate(const std::map<std::string, int64_t>& bindings) const;
  // Structural identity (same expression text), no guard recorded.
  bool same_as(const SymInt& other) const { return str() == other.str(); }

  // Where the value was read (x.shape(i) records its caller), for guard messages.
  const std::optional<std::source_location>& origin() const { return origin_; }
  SymInt with_origin(const std::source_location& loc) const;

  const std::shared_ptr<const SymExpr>& expr() const { return expr_; }
  static SymInt from_expr(std::shared_ptr<const SymExpr> expr);

 private:
  int64_t value_ = 0;
  std::shared_ptr<const SymExpr> expr_;
  std::optional<std::source_location> origin_;
};

SymInt operator+(const SymInt& a, const SymInt& b);
SymInt operator-(const SymInt& a, const SymInt& b);
SymInt operator*(const SymInt& a, const SymInt& b);
SymInt operator/(const SymInt& a, const SymInt& b);  // floor division, as for sizes
SymInt operator%(const SymInt& a, const SymInt& b);
SymInt sym_max(const SymInt& a, const SymInt& b);

enum class GuardOp { Eq, Ne, Lt, Le, Gt, Ge };
const char* guard_op_text(GuardOp op);
bool decide(int64_t x, GuardOp op, int64_t y);  // x op y

// One shape decision made while tracing: `lhs op rhs` was `result`.
struct ShapeGuard {
  SymInt lhs;
  GuardOp op = GuardOp::Eq;
  SymInt rhs;
  bool result = false;
  std::optional<std::source_location> where;
};

// Receives the decisions made on symbolic dims; installed by the tracer for the current thread.
class GuardSink {
 public:
  virtual ~GuardSink() = default;
  virtual void record(const ShapeGuard& guard) = 0;
};
GuardSink* current_guard_sink();
class GuardSinkScope {
 public:
  explicit GuardSinkScope(GuardSink* sink);
  ~GuardSinkScope();
  GuardSinkScope(const GuardSinkScope&) = delete;
  GuardSinkScope& operator=(const GuardSinkScope&) = delete;

 private:
  GuardSink* previous_;
};

bool compare(const SymInt& a, GuardOp op, const SymInt& b);
inline bool operator==(const SymInt& a, const SymInt& b) { return compare(a, GuardOp::Eq, b); }
inline bool operator!=(const SymInt& a, const SymInt& b) { return compare(a, GuardOp::Ne, b); }
inline bool operator<(const SymInt& a, const SymInt& b) { return compare(a, GuardOp::Lt, b); }
inline bool operator<=(const SymInt& a, const SymInt& b) { return compare(a, GuardOp::Le, b); }
inline bool operator>(const SymInt& a, const SymInt& b) { return compare(a, GuardOp::Gt, b); }
inline bool operator>=(const SymInt& a, const SymInt& b) { return compare(a, GuardOp::Ge, b); }
// Plain-int overloads keep `x.shape(0) > 10` unambiguous.
inline bool operator==(const SymInt& a, int64_t b) { return compare(a, GuardOp::Eq, b); }
inline bool operator!=(const SymInt& a, int64_t b) { return compare(a, GuardOp::Ne, b); }
inline bool operator<(const SymInt& a, int64_t b) { return compare(a, GuardOp::Lt, b); }
inline bool operator<=(const SymInt& a, int64_t b) { return compare(a, GuardOp::Le, b); }
inline bool operator>(const SymInt& a, int64_t b) { return compare(a, GuardOp::Gt, b); }
inline bool operator>=(const SymInt& a, int64_t b) { return compare(a, GuardOp::Ge, b); }
inline bool operator==(const SymInt& a, int b) { return compare(a, GuardOp::Eq, int64_t(b)); }
inline bool operator!=(const SymInt& a, int b) { return compare(a, GuardOp::Ne, int64_t(b)); }
inline bool operator<(const SymInt& a, int b) { return compare(a, GuardOp::Lt, int64_t(b)); }
inline bool operator<=(const SymInt& a, int b) { return compare(a, GuardOp::Le, int64_t(b)); }
inline bool operator>(const SymInt& a, int b) { return compare(a, GuardOp::Gt, int64_t(b)); }
inline bool operator>=(const SymInt& a, int b) { return compare(a, GuardOp::Ge, int64_t(b)); }

// Parses the text form written by str(): integers, symbols [a-z_][a-z0-9_]*, + - * // % max(,),
// parentheses. `hints` gives symbol values (0 when absent). Throws kiln::Error on bad text.
SymInt parse_symint(const std::string& text, const std::map<std::string, int64_t>& hints = {});

}  // namespace kiln
