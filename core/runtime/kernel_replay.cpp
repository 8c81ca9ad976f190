// Replaying a fused kernel's nodes on the reference (ref), with sizes bound as the program bound them.
#include "core/runtime/kernel_replay.h"

#include "core/frontend/dispatch.h"
#include "core/support/error.h"

namespace kiln {

std::map<std::string, int64_t> bind_symbols(const Graph& graph, const std::vector<Tensor>& inputs) {
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size() && i < graph.inputs().size(); ++i) {
    const Shape& declared = graph.inputs()[i]->type.shape;
    std::vector<int64_t> actual = inputs[i].sizes();
    for (size_t d = 0; d < declared.size() && d < actual.size(); ++d)
      if (!declared[d].is_static() && declared[d].str().find_first_of("+-*/%(") == std::string::npos)
        bindings.emplace(declared[d].str(), actual[d]);
  }
  return bindings;
}

AttrMap concrete_attrs(const AttrMap& attrs, const std::map<std::string, int64_t>& bindings) {
  AttrMap out = attrs;
  for (const auto& [name, value] : attrs)
    if (const auto* syms = std::get_if<std::vector<SymInt>>(&value)) {
      std::vector<SymInt> fixed;
      for (const SymInt& s : *syms) fixed.push_back(s.is_static() ? s : SymInt(s.evaluate(bindings)));
      out.set(name, fixed);
    }
  return out;
}

void replay_on_ref(const std::vector<PlannedNode>& nodes, std::map<int, Tensor>& values,
                   const std::map<std::string, int64_t>& bindings) {
  for (const PlannedNode& n : nodes) {
    std::vector<Tensor> args;
    for (int id : n.inputs) {
      auto it = values.find(id);
      if (it == values.end())
        throw Error("kernel replay: node %" + std::to_string(n.id) + " '" + std::string(op_name(n.kind)) +
                    "' at " + n.provenance.str() + " reads value %" + std::to_string(id) +
                    ", which the kernel neither loads nor computes");
      args.push_back(it->second.device() == Device::ref() ? it->second : it->second.to(Device::ref()));
    }
    std::vector<Tensor> outs = run_op_at(n.kind, args, concrete_attrs(n.attrs, bindings), n.provenance);
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i) values[n.outputs[i]] = std::move(outs[i]);
  }
}

}  // namespace kiln
