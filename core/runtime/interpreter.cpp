// Graph interpreter: a value table filled in topological order.
#include "core/runtime/interpreter.h"

#include <map>
#include <unordered_map>

#include "core/frontend/dispatch.h"

namespace kiln {

namespace {

// Symbol values from the inputs: a graph input dim that is a bare symbol takes the input's size.
std::map<std::string, int64_t> bind_symbols(const Graph& graph, const std::vector<Tensor>& inputs) {
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& declared = graph.inputs()[i]->type.shape;
    std::vector<int64_t> actual = inputs[i].sizes();
    for (size_t d = 0; d < declared.size(); ++d) {
      const SymInt& dim = declared[d];
      if (dim.is_static() || dim.str().find_first_of("+-*/%(") != std::string::npos) continue;
      auto [it, inserted] = bindings.emplace(dim.str(), actual[d]);
      if (!inserted && it->second != actual[d])
        throw Error("interpret: symbol " + dim.str() + " is " + std::to_string(it->second) +
                    " in one input and " + std::to_string(actual[d]) + " in input " +
                    std::to_string(i) + " ('" + graph.inputs()[i]->name + "')");
    }
  }
  return bindings;
}

// Symbolic sizes in attributes (reshape/expand targets) become this run's integers.
AttrMap concrete_attrs(const AttrMap& attrs, const std::map<std::string, int64_t>& bindings) {
  AttrMap out = attrs;
  for (const auto& [name, value] : attrs) {
    if (const auto* syms = std::get_if<std::vector<SymInt>>(&value)) {
      std::vector<SymInt> fixed;
      for (const SymInt& s : *syms) fixed.push_back(s.is_static() ? s : SymInt(s.evaluate(bindings)));
      out.set(name, fixed);
    }
  }
  return out;
}

}  // namespace

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
  const std::map<std::string, int64_t> bindings = bind_symbols(graph, inputs);
  for (const Node* node : graph.nodes()) {
    std::vector<Tensor> args;
    args.reserve(node->inputs.size());
    for (const Value* v : node->inputs) args.push_back(env.at(v));
    std::vector<Tensor> outs = run_op_at(node->kind, args, concrete_attrs(node->attrs, bindings),
                                         node->provenance);
    // Ops without inputs (constants) run on cpu; their results belong on the graph's device.
    if (args.empty() && !inputs.empty())
      for (Tensor& t : outs) t = t.to(inputs[0].device());
    for (size_t i = 0; i < outs.size(); ++i) env[node->outputs[i]] = std::move(outs[i]);
  }
  std::vector<Tensor> results;
  for (const Value* v : graph.outputs()) results.push_back(env.at(v));
  return results;
}

}  // namespace kiln
