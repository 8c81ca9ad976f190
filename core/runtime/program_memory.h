// The memory-planning stage of a lowered program: the values its kernels write (intermediates and
// scratch, never graph inputs, outputs or constants) placed in arenas by liveness over the kernel
// order, for one set of sizes. The executor plans again when the input shapes change.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/runtime/lowered_program.h"
#include "core/runtime/memory_plan.h"

namespace kiln {

struct ProgramMemory {
  std::map<std::string, int64_t> bindings;  // the sizes planned for
  std::vector<PlanValue> values;            // the planned values, in first-write order
  std::vector<int> graph_ids;               // per planned value: its graph value id, -1 for scratch
  std::vector<int> plan_index;              // per program value: its planned value, -1 if unplanned
  MemoryPlan plan;
};

ProgramMemory plan_program_memory(const std::vector<ProgramValue>& values,
                                  const std::vector<ProgramKernel>& kernels,
                                  const std::map<std::string, int64_t>& bindings, size_t max_buffer_bytes);
// The sizes a program's inputs were traced with (each symbol's hint), for planning before the
// first run.
std::map<std::string, int64_t> traced_bindings(const std::vector<TensorType>& input_types);
// Every planned value with its kernel range and place: "%7 f32[8,64] kernels 2..4 arena 0 +256".
std::string print_program_memory(const ProgramMemory& memory);

// Concrete dims of `shape` with its symbols bound.
std::vector<int64_t> concrete_dims(const Shape& shape, const std::map<std::string, int64_t>& bindings);

}  // namespace kiln
