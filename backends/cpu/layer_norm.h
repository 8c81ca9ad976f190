// The cpu device's eager layer norm on contiguous f32 tensors, in vectorized loops (statistics in
// f64, as the reference computes them).
#pragma once

#include "backends/backend.h"

namespace kiln::cpu {

// Runs `run` and returns true where it is a layer norm whose input, output, weight and bias are
// contiguous f32 (weight and bias of the normalized size); returns false, having done nothing,
// otherwise.
bool run_layer_norm(const OpRun& run);

}  // namespace kiln::cpu
