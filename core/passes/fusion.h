// Fusion: decides which graph nodes run as one kernel. Pointwise nodes of one iteration shape that
// follow each other in the graph's order form one group (their intermediates never reach memory); a
// sum/mean/max/min/prod reduction joins the pointwise group that produces its input when nothing
// else reads that group's values. Everything else is a group of one.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln {

enum class FusionKind {
  Pointwise,  // one or more unary/binary nodes with the same output shape
  Reduce,     // a reduction, possibly with pointwise producers folded into its loop
  Single,     // one node lowered on its own (matmul, conv, data movement, ...)
  Constant,   // a literal: uploaded once, no kernel
};

struct FusionGroup {
  FusionKind kind = FusionKind::Single;
  std::vector<const Node*> nodes;     // in the graph's topological order
  std::vector<const Value*> outputs;  // values read after the group (or graph outputs, or unread)
  std::vector<int> origins() const;   // ids of every node in the group
};

struct FusionOptions {
  bool fuse = true;          // false: every node is its own group (the eager baseline)
  bool fuse_reductions = true;
};

bool is_fusible_pointwise(const Node& node);

// Groups in execution order; every node of `graph` is in exactly one group.
std::vector<FusionGroup> fuse_graph(const Graph& graph, const FusionOptions& options = {});

// "3 kernels: [add,mul,relu] [matmul] [exp]" for logs and test failures.
std::string describe_groups(const std::vector<FusionGroup>& groups);

}  // namespace kiln
