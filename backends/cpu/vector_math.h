// The cpu device's eager transcendental ops (exp, log, sin, cos, tanh, erf, sigmoid, silu, elu,
// gelu, and softmax and log_softmax over the last dim), vectorized with glibc's libmvec for the CPU
// kiln runs on.
#pragma once

#include "backends/backend.h"

namespace kiln::cpu {

// Runs `run` and returns true where it is one of those ops on a contiguous f32 or f64 tensor
// (softmax: f32) and this build vectorizes it (GCC on x86-64); returns false, having done nothing, otherwise.
bool run_vector_math(const OpRun& run);

}  // namespace kiln::cpu
