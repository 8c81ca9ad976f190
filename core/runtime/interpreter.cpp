// Graph interpreter: a value table filled in topological order.
#include "core/runtime/interpreter.h"

#include <unordered_map>

#include "core/frontend/dispatch.h"

namespace kiln {

std::vector<Tensor> interpret(const Graph& graph, const std::vector<Tensor>& inputs) {
  if (inputs.size() != graph.inputs().size())
    throw Error("interpret: the graph has " + std::to_string(graph.inputs().size()) +
                " inputs, " + std::to_string(inputs.size()) + " were given");
  std::unordered_map<const Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = graph.inputs()[i];
    const Tensor& t = inputs[i];
    if (t.dtype() != v->type.dtype || t.dim() != int64_t(v->type.rank()))
      throw Error("interpret: input " + std::to_string(i) + " ('" + v->name + "') should be " +
                  v->type.str() + ", got " + t.type().str());
    for (size_t d = 0; d < v->type.rank(); ++d)
      if (v->type.shape[d].is_static() && v->type.shape[d].value() != t.sizes()[d])
        throw Error("interpret: input " + std::to_string(i) + " ('" + v->name + "') should be " +
                    v->type.str() + ", got " + t.type().str());
    env[v] = t;
  }
  for (const Node* node : graph.nodes()) {
    std::vector<Tensor> args;
    args.reserve(node->inputs.size());
    for (const Value* v : node->inputs) args.push_back(env.at(v));
    std::vector<Tensor> outs = run_op_at(node->kind, args, node->attrs, node->provenance);
    for (size_t i = 0; i < outs.size(); ++i) env[node->outputs[i]] = std::move(outs[i]);
  }
  std::vector<Tensor> results;
  for (const Value* v : graph.outputs()) results.push_back(env.at(v));
  return results;
}

}  // namespace kiln
