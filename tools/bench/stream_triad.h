// The host's memory bandwidth, as STREAM's triad measures it: the yardstick of the benchmarks'
// memory-bound rows.
#pragma once

#include <cstddef>

namespace kiln::bench {

// GB/s of a[i] = b[i] + 3 * c[i] over f32 arrays of `bytes` each, one slice per hardware thread,
// counting three arrays moved (as STREAM does); the median of `reps` runs after one warm-up.
double stream_triad_gbs(size_t bytes, int reps);

}  // namespace kiln::bench
