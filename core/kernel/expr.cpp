// Expression builders with small constant folds for index arithmetic.
#include "core/kernel/expr.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>

namespace kiln::kernel {
namespace {

ExprRef make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

bool is_const(const ExprRef& e, double v) { return e->kind == ExprKind::Const && e->value == v; }

}  // namespace

ExprRef constant(double value, DType type) {
  Expr e;
  e.kind = ExprKind::Const;
  e.type = type;
  e.value = value;
  return make(std::move(e));
}

ExprRef param(int slot) {
  Expr e;
  e.kind = ExprKind::Param;
  e.type = DType::I32;
  e.index = slot;
  return make(std::move(e));
}

ExprRef coord(int dim) {
  Expr e;
  e.kind = ExprKind::Coord;
  e.type = DType::I32;
  e.index = dim;
  return make(std::move(e));
}

ExprRef linear_index() { return coord(-1); }

ExprRef load(int buffer, DType type, ExprRef offset) {
  Expr e;
  e.kind = ExprKind::Load;
  e.type = type;
  e.index = buffer;
  e.args = {std::move(offset)};
  return make(std::move(e));
}

ExprRef op(OpKind kind, DType type, std::vector<ExprRef> args, AttrMap attrs) {
  Expr e;
  e.kind = ExprKind::Op;
  e.type = type;
  e.op = kind;
  e.attrs = std::move(attrs);
  e.args = std::move(args);
  return make(std::move(e));
}

ExprRef cast(ExprRef e, DType type) {
  if (e->type == type) return e;
  if (e->kind == ExprKind::Const) return constant(e->value, type);
  return op(OpKind::Cast, type, {std::move(e)});
}

ExprRef select(ExprRef condition, ExprRef a, ExprRef b) {
  DType t = a->type;
  return op(OpKind::Where, t, {std::move(condition), std::move(a), std::move(b)});
}

ExprRef iadd(ExprRef a, ExprRef b) {
  if (is_const(a, 0)) return b;
  if (is_const(b, 0)) return a;
  if (a->kind == ExprKind::Const && b->kind == ExprKind::Const)
    return constant(a->value + b->value, DType::I32);
  return op(OpKind::Add, DType::I32, {std::move(a), std::move(b)});
}

ExprRef imul(ExprRef a, ExprRef b) {
  if (is_const(a, 1)) return b;
  if (is_const(b, 1)) return a;
  if (is_const(a, 0) || is_const(b, 0)) return constant(0, DType::I32);
  if (a->kind == ExprKind::Const && b->kind == ExprKind::Const)
    return constant(a->value * b->value, DType::I32);
  return op(OpKind::Mul, DType::I32, {std::move(a), std::move(b)});
}

ExprRef idiv(ExprRef a, ExprRef b) {
  if (is_const(b, 1)) return a;
  return op(OpKind::Div, DType::I32, {std::move(a), std::move(b)});
}

ExprRef imod(ExprRef a, ExprRef b) {
  if (is_const(b, 1)) return constant(0, DType::I32);
  return op(OpKind::Mod, DType::I32, {std::move(a), std::move(b)}, {{"fmod", true}});
}

ExprRef ExprSharing::operator()(const ExprRef& e) {
  auto done = shared_.find(e.get());
  if (done != shared_.end()) return done->second;
  Expr copy = *e;
  bool changed = false;
  for (ExprRef& a : copy.args) {
    ExprRef shared = (*this)(a);
    changed = changed || shared != a;
    a = std::move(shared);
  }
  uint64_t bits = 0;
  static_assert(sizeof bits == sizeof copy.value);
  std::memcpy(&bits, &copy.value, sizeof bits);
  std::string key = std::to_string(int(copy.kind)) + " " + std::to_string(int(copy.type)) + " " +
                    std::to_string(bits) + " " + std::to_string(copy.index) + " " + std::to_string(int(copy.op)) + " |";
  for (const ExprRef& a : copy.args) key += " " + std::to_string(reinterpret_cast<uintptr_t>(a.get()));
  key += " |";
  for (int id : copy.origins) key += " " + std::to_string(id);
  std::vector<ExprRef>& same_key = nodes_[key];
  for (const ExprRef& candidate : same_key)
    if (candidate->attrs == copy.attrs) return shared_[e.get()] = candidate;
  ExprRef out = changed ? make(std::move(copy)) : e;
  same_key.push_back(out);
  return shared_[e.get()] = out;
}

ExprRef with_origins(const ExprRef& e, std::vector<int> origins) {
  Expr copy = *e;
  copy.origins = std::move(origins);
  return make(std::move(copy));
}

std::vector<int> collect_origins(const ExprRef& root) {
  std::set<int> ids;
  std::set<const Expr*> seen;
  std::function<void(const ExprRef&)> walk = [&](const ExprRef& e) {
    if (!seen.insert(e.get()).second) return;
    ids.insert(e->origins.begin(), e->origins.end());
    for (const ExprRef& a : e->args) walk(a);
  };
  walk(root);
  return {ids.begin(), ids.end()};
}

}  // namespace kiln::kernel
