// Horizontal fusion, the stage after lowering: independent small pointwise kernels of one program
// run as one launch, a horizontal kernel (kernel/kernel.h) with one segment per kernel. An
// optimizer's update is one such kernel per parameter; fused, a step launches a few.
#pragma once

#include <cstdint>
#include <string>

#include "core/kernel/dialect.h"
#include "core/runtime/lowered_program.h"

namespace kiln {

struct HorizontalFusionOptions {
  bool enabled = true;
  // A kernel joins when it iterates over at most this many elements (a symbolic size: its hint):
  // larger ones gain nothing from sharing a launch. On lavapipe, the MLP's step with its 401K and
  // 262K-element updates merged took 1.3-1.6x as long (BENCHMARKS.md, Run 10).
  int64_t max_elements = int64_t(1) << 16;
  int max_segments = 32;
};

// Merges kernels in launch order. A kernel joins a horizontal kernel when it is one pointwise step,
// with no template, no scratch and no in-place store, whose loads are at its linear index or at
// fixed offsets (elementwise over same-shaped values, and scalars); when every value it reads is
// made before the horizontal kernel runs (where its first member was), and no kernel that joins
// nothing runs between the two; when it writes only program outputs and small intermediates or
// joins the last kernel so far (a large intermediate is never made earlier); and when the merged
// kernel stays within the target's buffer, storage buffer and param limits. It joins the earliest
// such kernel. Returns the number of launches saved.
int fuse_horizontal(LoweredProgram& program, const kernel::CodegenTarget& target,
                    const HorizontalFusionOptions& options);

// One line per horizontal kernel: "kernel 3 horizontal: 4 segments [k5 add_f32_r2, ...]".
std::string print_horizontal(const LoweredProgram& program);

}  // namespace kiln
