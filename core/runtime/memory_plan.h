// Memory planning: places the values a program computes into a few arena buffers by their liveness
// over the kernel order, so values that are never live at once share bytes. A pointwise kernel may
// write its output over an input that dies there (in place). Arenas are split where one would pass
// the device's largest buffer. Graph inputs, outputs and parameters are not planned: they live in
// their own buffers and are never overwritten.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct PlanValue {
  std::string name;      // for messages: "%7 f32[256,1024]"
  size_t bytes = 0;
  int first = 0;         // index of the kernel that writes it
  int last = 0;          // index of the last kernel that reads it (>= first)
  int in_place_of = -1;  // a value this one may overwrite: read element-wise by kernel `first`
};

struct MemoryPlanOptions {
  size_t alignment = 256;  // every offset is a multiple (Vulkan's largest storage offset alignment)
  size_t max_buffer_bytes = SIZE_MAX;
  bool in_place = true;
};

struct Placement {
  int arena = 0;
  size_t offset = 0;
  bool in_place = false;  // shares its bytes with `in_place_of`
};

struct MemoryPlan {
  std::vector<Placement> placements;  // one per value
  std::vector<size_t> arena_bytes;    // size of each arena buffer
  int64_t naive_bytes = 0;            // every value in its own buffer
  int64_t lower_bound_bytes = 0;      // peak bytes live at one kernel (in-place pairs counted once)
  int64_t planned_bytes = 0;          // sum of the arenas
  int in_place = 0;                   // values written over a dying input
  std::string str() const;            // "naive 3.0 MiB, lower bound 2.0 MiB, planned 2.0 MiB (1 arena)"
};

// Greedy by size with best fit: the largest blocks are placed first, each in the tightest gap left by
// blocks live at the same time. Throws kiln::Error naming the value when one alone passes
// max_buffer_bytes.
MemoryPlan plan_memory(const std::vector<PlanValue>& values, const MemoryPlanOptions& options = {});

}  // namespace kiln
