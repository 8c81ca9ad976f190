// Small helpers shared by the linalg, conv and norm lowerings: names, accumulator types, I32 index
// predicates and a Reduce-kernel finisher.
#pragma once

#include <string>
#include <vector>

#include "core/kernel/lower.h"

namespace kiln::kernel::util {

inline std::string kernel_name(OpKind kind, DType t, size_t rank) {
  return std::string(op_name(kind)) + "_" + std::string(dtype_name(t)) + "_r" + std::to_string(rank);
}

// Sums and products run in float for 16-bit floats (as the cpu reference does), else in the type.
inline DType accumulate_in(DType t) {
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

inline ExprRef iconst(int64_t v) { return constant(double(v), DType::I32); }
inline ExprRef isub(ExprRef a, ExprRef b) {
  if (b->kind == ExprKind::Const && b->value == 0) return a;
  return op(OpKind::Sub, DType::I32, {std::move(a), std::move(b)});
}
inline ExprRef imax(ExprRef a, ExprRef b) { return op(OpKind::Maximum, DType::I32, {std::move(a), std::move(b)}); }
inline ExprRef imin(ExprRef a, ExprRef b) { return op(OpKind::Minimum, DType::I32, {std::move(a), std::move(b)}); }
inline ExprRef ilt(ExprRef a, ExprRef b) { return op(OpKind::Lt, DType::Bool, {std::move(a), std::move(b)}); }
inline ExprRef ige(ExprRef a, ExprRef b) { return op(OpKind::Ge, DType::Bool, {std::move(a), std::move(b)}); }
inline ExprRef ieq(ExprRef a, ExprRef b) { return op(OpKind::Eq, DType::Bool, {std::move(a), std::move(b)}); }
inline ExprRef land(ExprRef a, ExprRef b) {
  if (!a) return b;
  return op(OpKind::LogicalAnd, DType::Bool, {std::move(a), std::move(b)});
}
// 0 <= v < size.
inline ExprRef in_range(ExprRef v, ExprRef size) { return land(ige(v, iconst(0)), ilt(v, std::move(size))); }
// v clamped into [0, size): an offset built from it never leaves the buffer, so the load can be
// evaluated unconditionally and discarded by a select.
inline ExprRef clamp_index(ExprRef v, ExprRef size) {
  return imin(imax(std::move(v), iconst(0)), isub(std::move(size), iconst(1)));
}

// Float math in type t.
inline ExprRef fadd(ExprRef a, ExprRef b, DType t) { return op(OpKind::Add, t, {std::move(a), std::move(b)}); }
inline ExprRef fsub(ExprRef a, ExprRef b, DType t) { return op(OpKind::Sub, t, {std::move(a), std::move(b)}); }
inline ExprRef fmul(ExprRef a, ExprRef b, DType t) { return op(OpKind::Mul, t, {std::move(a), std::move(b)}); }
inline ExprRef fdiv(ExprRef a, ExprRef b, DType t) { return op(OpKind::Div, t, {std::move(a), std::move(b)}); }

// Row-major offset of `coords` into a tensor of shape `dims`; a null coord is 0 and costs no
// param (broadcast dims, 1-d operands).
inline ExprRef strided_offset(KernelBuilder& b, const std::vector<ExprRef>& coords, const Shape& dims) {
  ExprRef offset = iconst(0);
  SymInt stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (coords[i]) offset = iadd(offset, imul(coords[i], b.param_for(stride)));
    stride = stride * dims[i];
  }
  return offset;
}

// Makes b's kernel a Reduce over [0, extent) folding `body` (already in acc_type) with `combiner`;
// stores cast(epilogue, out dtype) into `out_slot`. Every stored value and the body carry `origin`.
inline LoweredKernel finish_reduce(KernelBuilder& b, OpKind combiner, DType acc_type, const SymInt& extent,
                                   const ExprRef& body, int out_slot, DType out_type,
                                   const ExprRef& epilogue, int origin) {
  Kernel& k = b.kernel();
  k.combiner = combiner;
  k.accumulator_type = acc_type;
  k.extent = b.param_for(extent);
  k.body = with_origins(body, {origin});
  k.stores.push_back({out_slot, with_origins(cast(epilogue, out_type), {origin})});
  return b.finish();
}

inline SymInt product(const Shape& s, size_t begin, size_t end) {
  SymInt n = 1;
  for (size_t i = begin; i < end; ++i) n = n * s[i];
  return n;
}

}  // namespace kiln::kernel::util
