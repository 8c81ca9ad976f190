// The languages kernel IR prints to, and what a code-generating backend asks of the emitter.
#pragma once

namespace kiln::kernel {

enum class Dialect { Glsl, Cuda };
// The ProgramSource language a dialect's text is written in: "glsl" or "cuda".
inline const char* language_of(Dialect d) { return d == Dialect::Cuda ? "cuda" : "glsl"; }

// A backend that compiles generated kernels declares this: its dialect and the read/store forms
// that suit it (EmitOptions documents each).
struct CodegenTarget {
  Dialect dialect = Dialect::Glsl;
  bool texel_reads = false;
  bool vec4_pointwise = false;
};

}  // namespace kiln::kernel
