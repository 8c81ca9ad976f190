// Replaying a fused kernel's nodes on the reference (ref), with sizes bound as the program bound them.
#include "core/runtime/kernel_replay.h"

#include "core/runtime/execute_op.h"
#include "core/support/error.h"

namespace kiln {

void replay_on_ref(const std::vector<PlannedNode>& nodes, std::map<int, DeviceTensor>& values,
                   const SymbolBindings& bindings) {
  for (const PlannedNode& n : nodes) {
    std::vector<DeviceTensor> args;
    for (int id : n.inputs) {
      auto it = values.find(id);
      if (it == values.end())
        throw Error("kernel replay: node %" + std::to_string(n.id) + " '" + std::string(op_name(n.kind)) +
                    "' at " + n.provenance.str() + " reads value %" + std::to_string(id) +
                    ", which the kernel neither loads nor computes");
      args.push_back(it->second.copy_to(Device::ref()));
    }
    std::vector<DeviceTensor> outs = execute_op(n.kind, args, concrete_attrs(n.attrs, bindings), n.provenance);
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i) values[n.outputs[i]] = std::move(outs[i]);
  }
}

}  // namespace kiln
