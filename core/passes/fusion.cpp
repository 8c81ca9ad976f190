// Greedy fusion over the graph's topological order: a pointwise node joins the open pointwise group
// when it has the group's shape; groups stay contiguous in that order, so fusing never creates a
// cycle. Constants have no inputs and are uploaded once, so they never close a group.
#include "core/passes/fusion.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln {
namespace {

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_as(b[i])) return false;
  return true;
}

bool is_fusible_reduction(const Node& node) {
  switch (node.kind) {
    case OpKind::Sum: case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::Prod:
      return node.inputs.size() == 1 && node.outputs.size() == 1;
    default:
      return false;
  }
}

}  // namespace

std::vector<int> FusionGroup::origins() const {
  std::vector<int> ids;
  for (const Node* n : nodes) ids.push_back(n->id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool is_fusible_pointwise(const Node& node) {
  OpFamily family = op_def(node.kind).family;
  return (family == OpFamily::Unary || family == OpFamily::Binary) && node.outputs.size() == 1;
}

std::vector<FusionGroup> fuse_graph(const Graph& graph, const FusionOptions& options) {
  std::map<const Value*, std::vector<const Node*>> users;
  std::vector<Node*> nodes = graph.nodes();
  for (const Node* n : nodes)
    for (const Value* v : n->inputs) users[v].push_back(n);
  std::set<const Value*> graph_outputs(graph.outputs().begin(), graph.outputs().end());

  std::vector<FusionGroup> groups;
  std::map<const Node*, size_t> group_of;
  int open = -1;  // index of the pointwise group the next node may join
  auto start = [&](const Node* n, FusionKind kind) {
    groups.push_back({kind, {n}, {}});
    group_of[n] = groups.size() - 1;
    return int(groups.size()) - 1;
  };
  // A reduction may absorb the open group only when nothing but the reduction reads its values:
  // the fused kernel iterates over the reduction's output and cannot store the producers' values.
  auto only_feeds = [&](const FusionGroup& g, const Node* reduction) {
    std::set<const Node*> members(g.nodes.begin(), g.nodes.end());
    members.insert(reduction);
    for (const Node* m : g.nodes) {
      const Value* v = m->output();
      if (graph_outputs.count(v) || users[v].empty()) return false;
      for (const Node* u : users[v])
        if (!members.count(u)) return false;
    }
    return true;
  };

  for (const Node* n : nodes) {
    if (n->kind == OpKind::Constant) {
      start(n, FusionKind::Constant);
      continue;
    }
    if (options.fuse && open >= 0 && is_fusible_pointwise(*n) &&
        same_shape(n->output()->type.shape, groups[size_t(open)].nodes.back()->output()->type.shape)) {
      groups[size_t(open)].nodes.push_back(n);
      group_of[n] = size_t(open);
      continue;
    }
    if (options.fuse && options.fuse_reductions && open >= 0 && is_fusible_reduction(*n)) {
      FusionGroup& g = groups[size_t(open)];
      const Node* producer = n->inputs[0]->producer;
      if (producer && group_of.count(producer) && group_of[producer] == size_t(open) &&
          same_shape(n->inputs[0]->type.shape, g.nodes.back()->output()->type.shape) && only_feeds(g, n)) {
        g.nodes.push_back(n);
        g.kind = FusionKind::Reduce;
        group_of[n] = size_t(open);
        open = -1;
        continue;
      }
    }
    if (is_fusible_pointwise(*n)) {
      open = start(n, FusionKind::Pointwise);
    } else {
      start(n, is_fusible_reduction(*n) ? FusionKind::Reduce : FusionKind::Single);
      open = -1;
    }
  }

  for (FusionGroup& g : groups) {
    std::set<const Node*> members(g.nodes.begin(), g.nodes.end());
    for (const Node* m : g.nodes)
      for (const Value* v : m->outputs) {
        bool needed = graph_outputs.count(v) || users[v].empty();
        for (const Node* u : users[v]) needed = needed || !members.count(u);
        if (needed) g.outputs.push_back(v);
      }
  }
  return groups;
}

std::string describe_groups(const std::vector<FusionGroup>& groups) {
  std::string text;
  int kernels = 0;
  for (const FusionGroup& g : groups) {
    if (g.kind == FusionKind::Constant) continue;
    ++kernels;
    text += " [";
    for (size_t i = 0; i < g.nodes.size(); ++i)
      text += (i ? "," : "") + std::string(op_name(g.nodes[i]->kind));
    text += "]";
  }
  return std::to_string(kernels) + (kernels == 1 ? " kernel:" : " kernels:") + text;
}

}  // namespace kiln
