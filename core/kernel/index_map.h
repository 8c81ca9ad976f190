// I32 index helpers for data-movement lowerings: comparisons, min/max/abs and clamps on index
// expressions, built from the graph's op kinds so every printer and the evaluator understand them.
#pragma once

#include <vector>

#include "core/kernel/expr.h"

namespace kiln::kernel {

inline ExprRef ilt(ExprRef a, ExprRef b) { return op(OpKind::Lt, DType::Bool, {std::move(a), std::move(b)}); }
inline ExprRef ige(ExprRef a, ExprRef b) { return op(OpKind::Ge, DType::Bool, {std::move(a), std::move(b)}); }
inline ExprRef isub(ExprRef a, ExprRef b) {
  if (b->kind == ExprKind::Const && b->value == 0) return a;
  return op(OpKind::Sub, DType::I32, {std::move(a), std::move(b)});
}
inline ExprRef imin(ExprRef a, ExprRef b) { return op(OpKind::Minimum, DType::I32, {std::move(a), std::move(b)}); }
inline ExprRef imax(ExprRef a, ExprRef b) { return op(OpKind::Maximum, DType::I32, {std::move(a), std::move(b)}); }
inline ExprRef iabs(ExprRef a) { return op(OpKind::Abs, DType::I32, {std::move(a)}); }
// Clamps into [lo, hi]; callers make sure lo <= hi.
inline ExprRef iclamp(ExprRef v, ExprRef lo, ExprRef hi) { return imax(imin(std::move(v), std::move(hi)), std::move(lo)); }

// Conjunction of predicates; true when empty.
inline ExprRef all_of(const std::vector<ExprRef>& preds) {
  if (preds.empty()) return constant(1, DType::Bool);
  ExprRef r = preds[0];
  for (size_t i = 1; i < preds.size(); ++i) r = op(OpKind::LogicalAnd, DType::Bool, {r, preds[i]});
  return r;
}

}  // namespace kiln::kernel
