// Lowering of a fused group of graph nodes into one LoweredOp: each node is lowered alone, then its
// expression is rebuilt inside one kernel with loads of earlier group members replaced by their
// expressions, so intermediates never reach memory.
#pragma once

#include <vector>

#include "core/ir/graph.h"
#include "core/kernel/lower.h"

namespace kiln::kernel {

struct LoweredGroup {
  // Step args index: inputs (0..n-1), then outputs, then op.temps, as for lower_op.
  LoweredOp op;
  std::vector<const Value*> inputs;   // values read from memory, in arg order
  std::vector<const Value*> outputs;  // values written to memory, in arg order
};

// `nodes` in topological order: either one node of any op, or pointwise nodes that all produce the
// same shape, optionally ended by one sum/mean/max/min/prod reduction of the last shape (the
// group fusion.h forms). `outputs`: the members' values needed after the group. Every expression
// keeps the ids of the nodes it computes, so the kernel's origins list every node in the group.
// Throws kiln::Error naming the group's ops when it is not of that form.
LoweredGroup lower_group(const std::vector<const Node*>& nodes, const std::vector<const Value*>& outputs);

}  // namespace kiln::kernel
