// Matmuls of a few rows (batch-1 inference: an LSTM's steps, an MLP's layers) as kiln's own loops.
// Below a few hundred thousand flops a oneDNN primitive's call costs more than its arithmetic: with
// its 30 step matmuls ([1, 64] x [64, 256] + add) here, the exported LSTM's compiled run took
// 0.076-0.085 ms instead of 0.105 (BENCHMARKS.md, Run 40). The loops run on the calling thread,
// compiled for AVX-512, AVX2 and the baseline (KILN_CPU_CLONES).
#pragma once

#include <memory>
#include <span>

#include "backends/cpu/onednn_ops.h"

namespace kiln::cpu {

// The kernel for `run` (a matmul, linear or gemm: f32, one matrix of at most kSmallMatmulRows rows
// under kSmallMatmulFlops, or one row times a transposed weight of any size, which reading the
// weight bounds: its columns split over the threads from kSmallMatmulFlops) with its epilogue, or
// nullptr where it is not such a matmul or a step of the epilogue is none of: add, sub, mul, div,
// maximum, minimum with a scalar, a per-column or a full-size row-major operand; relu; neg.
std::unique_ptr<HostKernel> make_small_matmul(const OpRun& run, std::span<const EpilogueStep> epilogue);

inline constexpr int64_t kSmallMatmulRows = 4;
inline constexpr double kSmallMatmulFlops = 4e5;

}  // namespace kiln::cpu
