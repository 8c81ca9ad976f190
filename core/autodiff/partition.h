// Partitioning a differentiable function between its forward and its backward: which forward
// values the backward saves, and which it recomputes. kiln::compile uses it when a compiled call
// must be differentiable: the forward program also returns the saved values, and the backward
// program reads them instead of running the forward again.
#pragma once

#include <vector>

#include "core/ir/graph.h"

namespace kiln {

// The values of `graph` a backward should save: those the gradient graph (every floating output
// differentiated with respect to the inputs marked in `wrt`) reads, where the outputs of pointwise
// ops and views are recomputed from their operands instead (they fuse into the backward's kernels,
// as AOTAutograd's partitioner recomputes them) and every other value (matmul, conv, reductions,
// norms, gathers) is saved. Graph inputs and outputs are never listed: the caller has them. In
// graph order.
std::vector<const Value*> values_to_save(const Graph& graph, const std::vector<bool>& wrt);

}  // namespace kiln
