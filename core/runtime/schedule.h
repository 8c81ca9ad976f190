// The kernel schedule: fusion's output for one backend. Which graph nodes run as one kernel, in
// which order, and which lone ops the backend may serve with a tuned template. It has a text form
// (KILN_DUMP_IR's NN-fusion.txt) and is what lowering consumes.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/ir/graph.h"
#include "core/passes/fusion.h"

namespace kiln {

struct ScheduledKernel {
  FusionGroup group;
  // A group of one op the backend has a template for, or such an op with the epilogue its template
  // takes: at each set of sizes the executor asks the backend for it (Backend::plan_template,
  // plan_fused_template), and runs the group's generic kernel when it declines.
  bool template_candidate = false;
};

struct KernelSchedule {
  std::vector<ScheduledKernel> kernels;  // execution order; constants included (FusionKind::Constant)
};

// Fusion for `backend`: an op with a template that serves its traced sizes runs as that template,
// since on lavapipe the template beats the generic kernel with the epilogue fused. It takes the
// pointwise chain after it where the backend fuses that into the template (plan_fused_template).
// `max_autotune`: the backend may time its template variants to decide. `template_views`: a matmul's
// template reads the views in front of it in place where it can (FusionOptions::template_views).
KernelSchedule schedule_kernels(const Graph& graph, Backend& backend, bool fuse = true, bool max_autotune = false,
                                bool template_views = true);

// A value as a backend sees it when asked at the traced sizes: symbolic dims at their hints, no buffer.
BufferView at_hints(const Value* v);
// A node's operands and results so (OpRun's spans point into them).
struct ViewsAtHints {
  explicit ViewsAtHints(const Node& n);
  std::vector<BufferView> inputs, outputs;
};

// One line per kernel, in order:
//   kernel 0 pointwise [%2 add, %3 relu] reads %0 %1 writes %3
//   kernel 1 single template? [%4 matmul] reads %3 %5 writes %4
//   constant %1
std::string print_schedule(const KernelSchedule& schedule);

}  // namespace kiln
