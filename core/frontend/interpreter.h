// Runs a Graph node by node as eager ops (run_op_at), so autograd records through it and an
// enclosing trace sees every node: how imported models run eagerly and differentiate.
#pragma once

#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/graph.h"

namespace kiln {

// `inputs` binds graph.inputs() in order (real inputs first, then captured tensors). Returns the
// graph outputs. Errors name the failing node's op and provenance.
std::vector<Tensor> interpret(const Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace kiln
