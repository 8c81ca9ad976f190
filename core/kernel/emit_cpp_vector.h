// C++ kernels' vector blocks. A pointwise f32 kernel whose loads read either the element's own
// position or one element for all runs most of its range eight vectors at a time (of 16 floats
// with AVX-512, 8 with AVX2), each statement applied to all eight before the next, so the latencies of long chains
// (an exp, a division) overlap; the kernel's scalar loop, which the compiler vectorizes, takes the
// rest. Measured on the 24-op chain of BENCHMARKS: one vector per element group (what the
// compiler's own vectorizer makes of the scalar loop) waits on each exp and division in turn.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/kernel/kernel.h"

namespace kiln::kernel {

struct CppVectorLine {
  std::string text;
  std::vector<int> origins;  // the graph nodes the line computes
};

// The block's lines, placed before the kernel's scalar loop, which then starts where the block
// stopped (it advances `begin`); empty where the kernel does not qualify. `param` prints a param
// slot as the kernel reads it; `total` is the kernel's element count.
std::vector<CppVectorLine> cpp_vector_block(const Kernel& k, const std::function<std::string(int)>& param,
                                            const std::string& total);

// The vector type and the functions a block calls (exp, abs, kiln_max, kiln_min on vectors). A
// block compiles where the compiler is GCC targeting AVX2 or AVX-512 (KILN_VECTOR_BLOCKS).
const char* prelude_cpp_vector();

}  // namespace kiln::kernel
