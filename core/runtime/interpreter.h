// Runs a Graph node by node through the eager path on one device. On cpu this is the reference
// executor every compiled result is checked against; symbolic dims resolve from the inputs given.
#pragma once

#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/graph.h"

namespace kiln {

// `inputs` binds graph.inputs() in order (real inputs first, then captured tensors). Returns the
// graph outputs. Errors name the failing node's op and provenance.
std::vector<Tensor> interpret(const Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace kiln
