// Eager autograd, shaped like libtorch's. An op whose inputs require grad records an AutogradNode
// (only then: other ops pay one flag test per input). backward() turns the recorded nodes between
// the leaves and the differentiated tensor into a Graph, differentiates it with add_gradients (the
// transform compiled training uses too), and runs the gradient graph through compile_graph, one
// program per graph structure and device, cached, with the saved forward values as its inputs.
#pragma once

#include <memory>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/attr.h"
#include "core/ir/graph.h"
#include "core/ir/op.h"
#include "core/ir/provenance.h"

namespace kiln {

// One recorded op: what its backward needs. Its outputs' data is kept as buffers, not tensors,
// so a tensor and the node that made it do not own each other.
struct AutogradNode {
  // Releases the chain of nodes behind this one with a loop: the default destructor would release
  // each input's node from inside its reader's, as deep as the recorded chain.
  ~AutogradNode();
  // A compiled function's call records one node: `graph` (the function as traced at this call's
  // sizes) maps the inputs to the outputs, and `kind` is unused.
  std::shared_ptr<const Graph> graph;
  // With `graph`: values inside it the compiled forward also returned, which the backward reads
  // instead of recomputing them.
  std::vector<const Value*> saved_values;
  std::vector<std::shared_ptr<Buffer>> saved_buffers;
  OpKind kind = OpKind::Constant;
  AttrMap attrs;  // complete
  Provenance where;
  std::vector<Tensor> inputs;
  std::vector<TensorType> output_types;
  std::vector<std::shared_ptr<Buffer>> outputs;
  Device device;
};

// Whether ops record autograd nodes on this thread (on by default; NoGradGuard turns it off).
bool grad_mode_enabled();

// While alive, ops on this thread record nothing for autograd (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool before_;
};

// The gradients of sum(outputs) (each output one element) with respect to `inputs`, which may be
// leaves or intermediate results, returned rather than accumulated into grad(). An input nothing
// connects to an output gets zeros.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         Loc loc = Loc::current());

// Called by dispatch after an eager op ran: records a node when grad mode is on and an input
// requires grad, and marks the floating-point outputs as requiring grad.
void record_for_autograd(OpKind kind, const AttrMap& attrs, const Provenance& where,
                         const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

// Called by kiln::compile after a compiled program ran: records the call as one node whose
// backward differentiates `graph` (inputs: `inputs`, outputs: `outputs`), when grad mode is on and
// an input requires grad. `saved` holds values of `graph` the forward computed (its outputs are
// saved too); the backward recomputes the others it needs.
void record_compiled_call(std::shared_ptr<const Graph> graph, const std::vector<Tensor>& inputs,
                          std::vector<Tensor>& outputs,
                          const std::vector<std::pair<const Value*, Tensor>>& saved = {});

}  // namespace kiln
