// The text form of kernel IR: what lowering produced, one kernel per block, its expression DAG as
// numbered lines (shared subexpressions printed once), for dumps (KILN_DUMP_IR) and text tests.
#pragma once

#include <functional>
#include <string>

#include "core/kernel/kernel.h"

namespace kiln::kernel {

// kernel add_f32_r2 pointwise(rank 2, params [s0, 4])
//   b0: f32 in
//   b1: f32 out
//   e0 = load b0[linear] : f32
//   e1 = relu e0 : f32                          <- %3 relu
//   store b1[linear] = e1
// `describe_origin` names a graph node id ("%3 relu"); unset, ids print as "node 2".
std::string print_kernel(const LoweredKernel& kernel,
                         const std::function<std::string(int)>& describe_origin = {});

}  // namespace kiln::kernel
