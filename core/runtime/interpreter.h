// Runs a Graph node by node on one device: each node through execute_op. On ref this is the
// reference executor every compiled result is checked against; symbolic dims resolve from the
// inputs given. The front end's interpret (core/frontend/interpreter.h) walks the same way over
// Tensors, so autograd and an enclosing trace see every node.
#pragma once

#include <unordered_map>
#include <vector>

#include "core/ir/graph.h"
#include "core/runtime/device_tensor.h"
#include "core/runtime/symbol_bindings.h"

namespace kiln {

// `inputs` binds graph.inputs() in order (real inputs first, then captured tensors). Returns the
// graph outputs. Errors name the failing node's op and provenance.
std::vector<DeviceTensor> interpret(const Graph& graph, const std::vector<DeviceTensor>& inputs);

// The walk both interpreters share: `inputs` (already checked, see bind_graph_inputs) bind
// graph.inputs(); each node in order runs as run_node(node, its arguments, its attributes at
// `bindings`) and returns its outputs; the graph's outputs are returned. The walk lets go of each
// value after the last node that reads it (the graph's outputs at the end), so intermediates do
// not all stay alive to the end: an eager backward's peak memory is then near its forward's.
template <class T, class RunNode>
std::vector<T> walk_graph(const Graph& graph, const std::vector<T>& inputs,
                          const SymbolBindings& bindings, RunNode run_node) {
  constexpr size_t kReturned = ~size_t(0);
  std::unordered_map<const Value*, size_t> last_read;  // node index; absent: never read
  size_t index = 0;
  for (const Node* node : graph.nodes()) {
    for (const Value* v : node->inputs) last_read[v] = index;
    ++index;
  }
  for (const Value* v : graph.outputs()) last_read[v] = kReturned;
  std::unordered_map<const Value*, T> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[graph.inputs()[i]] = inputs[i];
  index = 0;
  for (const Node* node : graph.nodes()) {
    std::vector<T> args;
    args.reserve(node->inputs.size());
    for (const Value* v : node->inputs) args.push_back(env.at(v));
    std::vector<T> outs = run_node(*node, args, concrete_attrs(node->attrs, bindings));
    args.clear();
    for (const Value* v : node->inputs)
      if (last_read.at(v) == index) env.erase(v);
    for (size_t i = 0; i < outs.size(); ++i)
      if (last_read.count(node->outputs[i])) env[node->outputs[i]] = std::move(outs[i]);
    ++index;
  }
  std::vector<T> results;
  for (const Value* v : graph.outputs()) results.push_back(env.at(v));
  return results;
}

}  // namespace kiln
