// Binding a graph's symbols from the sizes of one run's inputs.
#include "core/runtime/symbol_bindings.h"

#include "core/support/error.h"

namespace kiln {

SymbolBindings bind_graph_inputs(const Graph& graph, const std::vector<TensorType>& inputs) {
  if (inputs.size() != graph.inputs().size())
    throw Error("interpret: the graph has " + std::to_string(graph.inputs().size()) + " inputs, " +
                std::to_string(inputs.size()) + " were given");
  SymbolBindings bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = graph.inputs()[i];
    const TensorType& got = inputs[i];
    auto mismatch = [&] {
      return Error("interpret: input " + std::to_string(i) + " ('" + v->name + "') should be " +
                   v->type.str() + ", got " + got.str());
    };
    if (got.dtype != v->type.dtype || got.rank() != v->type.rank()) throw mismatch();
    const std::vector<int64_t> actual = static_dims(got.shape);
    for (size_t d = 0; d < actual.size(); ++d) {
      const SymInt& dim = v->type.shape[d];
      if (dim.is_static()) {
        if (dim.value() != actual[d]) throw mismatch();
        continue;
      }
      if (dim.str().find_first_of("+-*/%(") != std::string::npos) continue;  // not a bare symbol
      auto [it, inserted] = bindings.emplace(dim.str(), actual[d]);
      if (!inserted && it->second != actual[d])
        throw Error("interpret: symbol " + dim.str() + " is " + std::to_string(it->second) +
                    " in one input and " + std::to_string(actual[d]) + " in input " +
                    std::to_string(i) + " ('" + v->name + "')");
    }
  }
  return bindings;
}

AttrMap concrete_attrs(const AttrMap& attrs, const SymbolBindings& bindings) {
  AttrMap out = attrs;
  for (const auto& [name, value] : attrs)
    if (const auto* syms = std::get_if<std::vector<SymInt>>(&value)) {
      std::vector<SymInt> fixed;
      for (const SymInt& s : *syms) fixed.push_back(s.is_static() ? s : SymInt(s.evaluate(bindings)));
      out.set(name, fixed);
    }
  return out;
}

}  // namespace kiln
