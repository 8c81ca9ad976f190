// The cpu device's eager layer, batch and group norms on contiguous f32 tensors, in vectorized
// loops (statistics in f64, as the reference computes them).
#pragma once

#include "backends/backend.h"

namespace kiln::cpu {

// Runs `run` and returns true where it is a layer, batch or group norm whose input, output and
// parameters are contiguous f32 (parameters of the normalized size, or one per channel); returns
// false, having done nothing, otherwise.
bool run_norm(const OpRun& run);

}  // namespace kiln::cpu
