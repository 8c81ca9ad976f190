// The front end's graph interpreter: the runtime's walk over Tensors through run_op_at.
#include "core/frontend/interpreter.h"

#include "core/frontend/dispatch.h"
#include "core/runtime/interpreter.h"

namespace kiln {

std::vector<Tensor> interpret(const Graph& graph, const std::vector<Tensor>& inputs) {
  std::vector<TensorType> types;
  for (const Tensor& t : inputs) types.push_back(t.type());
  const SymbolBindings bindings = bind_graph_inputs(graph, types);
  const Device device = inputs.empty() ? Device::cpu() : inputs[0].device();
  return walk_graph(graph, inputs, bindings,
                    [&](const Node& node, const std::vector<Tensor>& args, const AttrMap& attrs) {
                      std::vector<Tensor> outs = run_op_at(node.kind, args, attrs, node.provenance);
                      // Ops without inputs (constants) run on cpu; their results belong on the graph's device.
                      if (args.empty())
                        for (Tensor& t : outs) t = t.to(device);
                      return outs;
                    });
}

}  // namespace kiln
