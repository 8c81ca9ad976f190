// The text of values in each dialect (GLSL, CUDA C, C++): types, literals, loads and stores, and one
// op applied to argument texts. The kernel printer (emit.cpp) and the templates' epilogues
// (backends/template_epilogue.cpp) print through them, so both compute alike.
#pragma once

#include <string>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/dtype.h"
#include "core/ir/op.h"
#include "core/kernel/dialect.h"

namespace kiln::kernel {

bool glsl(Dialect d);
bool cpp(Dialect d);
// The type values of `t` are computed in (float for 16-bit floats, int for i8/i16, uint for
// u8/u16/u32).
std::string compute_type(DType t, Dialect d);
// i8, i16, u8, u16: stored narrower than they compute.
bool is_narrow_integer(DType t);
// The type elements of `t` are stored as in a buffer.
std::string storage_type(DType t, Dialect d);
// An element read as its compute type, and a value converted for storing.
std::string load_text(DType t, const std::string& elem, Dialect d);
std::string store_text(DType t, const std::string& v, Dialect d);
std::string float_literal(double v, DType t, Dialect d);
std::string literal(double v, DType t, Dialect d);

// The text of one op of result type `type` on the argument texts `args` (of `arg_types`), exactly
// as kernels print it. The helpers it calls (kiln_max, kiln_erf, ...) are in
// emit_prelude_for(dialect). `index_math`: a mod of non-negative index values, printed as `%`.
std::string op_expression(OpKind op, const AttrMap& attrs, DType type, const std::vector<DType>& arg_types,
                          std::vector<std::string> args, Dialect dialect, bool index_math = false);

}  // namespace kiln::kernel
