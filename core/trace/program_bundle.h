// Bundles from a compiled program: the fused kernels it launches (with generated code, SPIR-V and
// device times), its memory plan, and per-kernel accuracy rows.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/runtime/accuracy.h"
#include "core/runtime/planned_program.h"
#include "core/trace/bundle.h"

namespace kiln::trace {

struct ProgramBundleOptions {
  std::string name = "graph";
  bool disassemble = true;  // ask the backend for each launch's listing (SPIR-V assembly on Vulkan)
};

// `graph` is the graph `program` was built from. Kernels are the program's, in execution order, each
// with the launches it ran at the latest input shapes (the traced shapes before a first run) and its
// group's nodes as origins; `timings` (from PlannedProgram::run_profiled, may be empty) give each
// launch's time and each kernel's start and total. Passes, guards and notes are the caller's.
Bundle make_program_bundle(const Graph& graph, const PlannedProgram& program,
                           const std::vector<LaunchTiming>& timings = {},
                           const ProgramBundleOptions& options = {});

// Fills bundle.accuracy, one row per kernel; kernel indices match make_program_bundle's.
void record_accuracy(Bundle& bundle, const KernelAccuracyReport& report);

}  // namespace kiln::trace
