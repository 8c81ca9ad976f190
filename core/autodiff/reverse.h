// Reverse-mode differentiation over the graph IR: adds to a graph the nodes that compute the
// gradients of some of its values with respect to others, from each op's vector-Jacobian rule in
// the op table (OpDef::vjp). The result is one joint graph, forward and backward, that every
// pass, fusion and backend handles like any other. Gradient nodes carry the provenance of the
// forward node they differentiate, marked as its gradient ("gradient of conv at model.cpp:12").
#pragma once

#include <vector>

#include "core/ir/graph.h"
#include "core/passes/pass.h"

namespace kiln {

struct GradientRequest {
  std::vector<Value*> outputs;  // the values differentiated
  // dL/d(output), one per output, of its type; nullptr (or none given): ones, for a one-element output.
  std::vector<Value*> seeds;
  std::vector<Value*> wrt;  // the values to differentiate with respect to
};

// The gradient of sum_i <seed_i, output_i> with respect to each `wrt` value, in order: zeros where
// nothing connects it to an output. Throws kiln::Error naming the op, its types and source line
// when a node on the way has no gradient rule yet, and when a seed is missing for an output of
// more than one element.
std::vector<Value*> add_gradients(Graph& graph, const GradientRequest& request);

// "autodiff": appends, as graph outputs, the gradient of output 0 (one element) with respect to
// every floating-point graph input, in input order. For text tests and dumps of the transform.
Pass autodiff_pass();

}  // namespace kiln
