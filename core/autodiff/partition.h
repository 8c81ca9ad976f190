// Partitioning a differentiable function between its forward and its backward: which forward
// values the backward saves, and which it recomputes. kiln::compile uses it when a compiled call
// must be differentiable: the forward program also returns the saved values, and the backward
// program reads them instead of running the forward again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln {

struct PartitionOptions {
  // 0: save the fewest bytes (the min cut); 1: save every forward value the backward reads and
  // recompute nothing. In between, recomputed values the backward reads are saved instead, smallest
  // first, while the saved bytes stay within min + budget * (max - min).
  double memory_budget = 0;
};

struct Partition {
  std::vector<const Value*> saved;       // in graph order; never a graph input or output
  std::vector<const Value*> recomputed;  // forward values the backward computes again, in graph order
  int64_t saved_bytes = 0;
  int64_t min_bytes = 0;  // the min cut's
  int64_t max_bytes = 0;  // saving every forward value the backward reads
};

// The partition of `graph` for the gradient of every floating output with respect to the inputs
// marked in `wrt`, as AOTAutograd's min-cut partitioner makes it: a cut of least bytes between
// what the forward computes and what the backward reads. Pointwise ops, views and constants may be
// recomputed (they fuse into the backward's kernels); matmul, conv, reductions, norms, gathers and
// random ops are never recomputed. Graph inputs and outputs cost nothing: the caller has them.
Partition partition_for_backward(const Graph& graph, const std::vector<bool>& wrt,
                                 const PartitionOptions& options = {});

// The partition's saved values.
std::vector<const Value*> values_to_save(const Graph& graph, const std::vector<bool>& wrt,
                                         const PartitionOptions& options = {});

// "save %4 linear f32[4,16] (256 bytes)" and "recompute %5 gelu" lines, then the totals.
std::string print_partition(const Partition& partition);

}  // namespace kiln
