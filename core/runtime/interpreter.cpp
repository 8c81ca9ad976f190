// The runtime's graph interpreter: walk_graph over DeviceTensors through execute_op.
#include "core/runtime/interpreter.h"

#include "core/runtime/execute_op.h"

namespace kiln {

std::vector<DeviceTensor> interpret(const Graph& graph, const std::vector<DeviceTensor>& inputs) {
  const SymbolBindings bindings = bind_graph_inputs(graph, types_of(inputs));
  const Device device = inputs.empty() ? Device::cpu() : inputs[0].device;
  return walk_graph(graph, inputs, bindings,
                    [&](const Node& node, const std::vector<DeviceTensor>& args, const AttrMap& attrs) {
                      std::vector<DeviceTensor> outs = execute_op(node.kind, args, attrs, node.provenance);
                      // Ops without inputs (constants) run on cpu; their results belong on the graph's device.
                      if (args.empty())
                        for (DeviceTensor& t : outs) t = t.copy_to(device);
                      return outs;
                    });
}

}  // namespace kiln
