// Graph-editing helpers shared by the passes (see graph_edit.h).
#include "core/passes/graph_edit.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "core/ir/grad_builder.h"
#include "core/support/error.h"

namespace kiln {

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_as(b[i])) return false;
  return true;
}

bool same_type(const TensorType& a, const TensorType& b) { return a.dtype == b.dtype && same_shape(a.shape, b.shape); }

const Literal* literal_of(const Value* v) {
  if (!v->producer || v->producer->kind != OpKind::Constant) return nullptr;
  return &v->producer->attrs.get_tensor("value");
}

bool literal_is_splat(const Literal& lit, double value) {
  for (int64_t i = 0; i < lit.numel(); ++i)
    if (!(lit.element(i) == value)) return false;
  return true;
}

bool is_topologically_ordered(const Graph& graph) {
  std::set<const Value*> defined(graph.inputs().begin(), graph.inputs().end());
  for (const Node* n : graph.nodes()) {
    for (const Value* in : n->inputs)
      if (!defined.count(in)) return false;
    defined.insert(n->outputs.begin(), n->outputs.end());
  }
  return true;
}

void restore_topological_order(Graph& graph, const std::unordered_map<const Node*, const Node*>& stands_for) {
  if (is_topologically_ordered(graph)) return;
  const std::vector<Node*> nodes = graph.nodes();
  std::map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = i;
  // Ready nodes go out by place: their own index, or that of the node they stand for.
  std::vector<std::pair<size_t, size_t>> place(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = stands_for.find(nodes[i]);
    auto at = it == stands_for.end() ? index.end() : index.find(it->second);
    place[i] = {at == index.end() ? i : at->second, i};
  }

  // Kahn's algorithm, always taking the earliest ready node, so valid stretches keep their order.
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> readers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value* in : nodes[i]->inputs)
      if (in->producer) {
        auto it = index.find(in->producer);
        if (it == index.end())
          throw Error("restore_topological_order: node %" + std::to_string(nodes[i]->id) +
                      " reads a value whose producer is not in the graph");
        ++pending[i];
        readers[it->second].push_back(i);
      }
  using Place = std::pair<size_t, size_t>;
  std::priority_queue<Place, std::vector<Place>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(place[i]);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top().second;
    ready.pop();
    order.push_back(i);
    for (size_t r : readers[i])
      if (--pending[r] == 0) ready.push(place[r]);
  }
  if (order.size() != nodes.size())
    throw Error("restore_topological_order: the graph has a cycle (" +
                std::to_string(nodes.size() - order.size()) + " nodes on it)");

  Graph rebuilt;
  std::map<const Value*, Value*> map;
  for (const Value* v : graph.inputs()) map[v] = rebuilt.add_input(v->type, v->name);
  for (size_t i : order) {
    const Node& n = *nodes[i];
    std::vector<Value*> ins;
    for (const Value* v : n.inputs) ins.push_back(map.at(v));
    rebuilt.add_copy(n, ins, &map);
  }
  std::vector<Value*> outs;
  for (const Value* v : graph.outputs()) outs.push_back(map.at(v));
  rebuilt.set_outputs(std::move(outs));
  graph = std::move(rebuilt);
}

void Replacements::appended_since(const Graph& graph, size_t first, const Node& replaced) {
  const std::vector<Node*> nodes = graph.nodes();
  for (size_t i = first; i < nodes.size(); ++i) places[nodes[i]] = &replaced;
}

int64_t Replacements::apply(Graph& graph) const {
  if (places.empty()) return 0;
  graph.replace_uses(values);
  restore_topological_order(graph, places);
  return int64_t(graph.remove_dead_nodes());
}

Pass rewrite_nodes_pass(std::string name, std::string summary, std::string counter,
                        std::function<bool(const Node&)> picked,
                        std::function<Value*(GradBuilder&, const Node&)> rewrite) {
  return {std::move(name), std::move(summary),
          [counter = std::move(counter), picked = std::move(picked), rewrite = std::move(rewrite)](Graph& graph) {
            Replacements replacements;
            for (Node* node : graph.nodes()) {
              if (node->outputs.size() != 1 || !picked(*node)) continue;
              const size_t before = graph.num_nodes();
              GradBuilder b = GradBuilder::expanding(graph, *node);
              Value* y = rewrite(b, *node);
              if (!y) continue;
              replacements.appended_since(graph, before, *node);
              replacements.values[node->output()] = y;
            }
            PassStats stats;
            stats.counters[counter] = int64_t(replacements.values.size());
            if (!replacements.values.empty()) stats.counters["nodes_removed"] = replacements.apply(graph);
            return stats;
          }};
}

}  // namespace kiln
