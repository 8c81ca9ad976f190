// The cpu device's eager transcendental ops (exp, log, sin, cos, tanh, erf, sigmoid, silu, elu,
// gelu, and softmax and log_softmax over the last dim), vectorized with glibc's libmvec for the CPU
// kiln runs on.
#pragma once

#include "backends/backend.h"

// A function built once per x86-64 vector ISA (AVX-512, AVX2, the baseline) with GCC, the loader
// picking the one for the CPU kiln runs on; a plain function elsewhere.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KILN_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_CPU_CLONES
#endif

namespace kiln::cpu {

// Runs `run` and returns true where it is one of those ops on a contiguous f32 or f64 tensor
// (softmax: f32) and this build vectorizes it (GCC on x86-64); returns false, having done
// nothing, otherwise.
bool run_vector_math(const OpRun& run);

}  // namespace kiln::cpu
