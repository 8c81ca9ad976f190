// The helper-function text generated kernels start with (see emit_prelude.cpp).
#pragma once

#include "core/kernel/dialect.h"

namespace kiln::kernel {

// The macros the preludes are written with: KILN_FN (a helper's qualifiers) and KILN_PRECISE (GLSL's
// `precise`, which forbids the driver to split an fma or reassociate; nothing in CUDA and C++, where
// fma is exact and arithmetic is not reassociated).
const char* prelude_macros(Dialect dialect);

const char* prelude_common();       // float/int/uint helpers
const char* prelude_f64();          // double overloads (GLSL needs shaderFloat64 for them)
const char* prelude_bf16();         // bf16 rounding store
const char* prelude_i64();          // int64 overloads
const char* prelude_u64();          // uint64 overloads
const char* prelude_cuda_compat();  // GLSL builtins and type names for CUDA C
const char* prelude_cpp_compat();   // GLSL builtins and type names for C++ (after <cmath>, <cstring>)

}  // namespace kiln::kernel
