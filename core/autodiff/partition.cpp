// partition_for_backward: a min cut over bytes between the forward and what the backward reads.
#include "core/autodiff/partition.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <set>

#include "core/autodiff/reverse.h"
#include "core/ir/op.h"

namespace kiln {
namespace {

// Ops a backward may recompute rather than save: elementwise maps, views and constants, which fuse
// into the kernels that read them.
bool recomputable(const Node& node) {
  const OpFamily family = op_def(node.kind).family;
  if (family == OpFamily::Unary || family == OpFamily::Binary) return true;
  switch (node.kind) {
    case OpKind::Constant:
    case OpKind::Reshape:
    case OpKind::Permute:
    case OpKind::Expand:
      return true;
    default:
      return false;
  }
}

int64_t bytes_of(const Value* v) { return numel(v->type.shape).hint() * int64_t(dtype_size(v->type.dtype)); }

// Maximum flow by Dinic's algorithm, then the nodes the source still reaches: the source side of a
// minimum cut.
class MinCut {
 public:
  static constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;

  explicit MinCut(int nodes) : adjacent_(size_t(nodes)) {}

  void add_edge(int from, int to, int64_t capacity) {
    adjacent_[size_t(from)].push_back(int(edges_.size()));
    edges_.push_back({to, capacity});
    adjacent_[size_t(to)].push_back(int(edges_.size()));
    edges_.push_back({from, 0});
  }

  std::vector<bool> source_side(int source, int sink) {
    while (levels(source, sink)) {
      next_.assign(adjacent_.size(), 0);
      while (push(source, sink, kInfinite) > 0) {
      }
    }
    levels(source, sink);
    std::vector<bool> reached(adjacent_.size());
    for (size_t n = 0; n < adjacent_.size(); ++n) reached[n] = level_[n] >= 0;
    return reached;
  }

 private:
  struct Edge {
    int to;
    int64_t capacity;  // left
  };

  bool levels(int source, int sink) {
    level_.assign(adjacent_.size(), -1);
    level_[size_t(source)] = 0;
    std::queue<int> queue;
    queue.push(source);
    while (!queue.empty()) {
      const int n = queue.front();
      queue.pop();
      for (int e : adjacent_[size_t(n)])
        if (edges_[size_t(e)].capacity > 0 && level_[size_t(edges_[size_t(e)].to)] < 0) {
          level_[size_t(edges_[size_t(e)].to)] = level_[size_t(n)] + 1;
          queue.push(edges_[size_t(e)].to);
        }
    }
    return level_[size_t(sink)] >= 0;
  }

  int64_t push(int n, int sink, int64_t limit) {
    if (n == sink) return limit;
    for (size_t& i = next_[size_t(n)]; i < adjacent_[size_t(n)].size(); ++i) {
      const int e = adjacent_[size_t(n)][i];
      Edge& edge = edges_[size_t(e)];
      if (edge.capacity <= 0 || level_[size_t(edge.to)] != level_[size_t(n)] + 1) continue;
      const int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity));
      if (pushed > 0) {
        edge.capacity -= pushed;
        edges_[size_t(e ^ 1)].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }

  std::vector<std::vector<int>> adjacent_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

}  // namespace

Partition partition_for_backward(const Graph& graph, const std::vector<bool>& wrt, const PartitionOptions& options) {
  std::map<const Value*, Value*> to_joint;
  Graph joint = graph.clone(&to_joint);
  std::set<const Node*> forward_nodes;
  for (const Node* n : joint.nodes()) forward_nodes.insert(n);
  GradientRequest request;
  for (Value* out : joint.outputs()) {
    if (!is_floating(out->type.dtype)) continue;
    request.outputs.push_back(out);
    request.seeds.push_back(joint.add_input(out->type, "seed"));
  }
  for (size_t i = 0; i < wrt.size() && i < joint.inputs().size(); ++i)
    if (wrt[i]) request.wrt.push_back(joint.inputs()[i]);
  if (request.outputs.empty() || request.wrt.empty()) return {};
  joint.set_outputs(add_gradients(joint, request));
  joint.remove_dead_nodes();

  // The forward values, numbered; free ones (graph inputs, and outputs, which the call returns)
  // cost nothing to keep.
  std::map<const Value*, int> number;
  std::vector<const Value*> values;
  auto add = [&](const Value* v) {
    if (number.emplace(v, int(values.size())).second) values.push_back(v);
  };
  for (const Value* v : joint.inputs()) add(v);
  for (const Node* n : joint.nodes())
    if (forward_nodes.count(n))
      for (const Value* v : n->outputs) add(v);
  std::set<const Value*> free;
  for (const Value* v : graph.outputs()) free.insert(to_joint.at(v));
  for (const Value* v : joint.inputs()) free.insert(v);
  std::set<const Value*> read_by_backward;
  for (const Node* n : joint.nodes())
    if (!forward_nodes.count(n))
      for (const Value* in : n->inputs)
        if (number.count(in)) read_by_backward.insert(in);
  auto cost = [&](const Value* v) { return free.count(v) ? int64_t(0) : bytes_of(v); };

  // Value i is nodes 2i (made) and 2i + 1 (kept); cutting the edge between them saves it. The
  // forward makes inputs and every value that is not recomputable; the backward needs what it reads.
  const int source = 2 * int(values.size()), sink = source + 1;
  MinCut cut(sink + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    const Value* v = values[i];
    cut.add_edge(2 * int(i), 2 * int(i) + 1, cost(v));
    if (!v->producer || !recomputable(*v->producer)) cut.add_edge(source, 2 * int(i), MinCut::kInfinite);
    if (v->producer)
      for (const Value* in : v->producer->inputs) cut.add_edge(2 * number.at(in) + 1, 2 * int(i), MinCut::kInfinite);
    if (read_by_backward.count(v)) cut.add_edge(2 * int(i) + 1, sink, MinCut::kInfinite);
  }
  const std::vector<bool> made = cut.source_side(source, sink);
  std::set<const Value*> preferred;
  for (size_t i = 0; i < values.size(); ++i)
    if (made[2 * i] && !made[2 * i + 1]) preferred.insert(values[i]);

  // What the backward then saves and recomputes: from each value it reads, back through
  // recomputable ops until a preferred, free or unrecomputable value.
  auto settle = [&](const std::set<const Value*>& prefer, std::set<const Value*>& saved,
                    std::set<const Value*>& again) {
    saved.clear();
    again.clear();
    std::vector<const Value*> work(read_by_backward.begin(), read_by_backward.end());
    std::set<const Value*> seen(work.begin(), work.end());
    int64_t total = 0;
    while (!work.empty()) {
      const Value* v = work.back();
      work.pop_back();
      if (free.count(v)) continue;
      if (prefer.count(v) || !recomputable(*v->producer)) {
        if (saved.insert(v).second) total += bytes_of(v);
        continue;
      }
      again.insert(v);
      for (const Value* in : v->producer->inputs)
        if (seen.insert(in).second) work.push_back(in);
    }
    return total;
  };
  Partition out;
  std::set<const Value*> saved, again;
  out.min_bytes = settle(preferred, saved, again);
  for (const Value* v : read_by_backward) out.max_bytes += cost(v);
  if (options.memory_budget > 0) {
    const double limit = double(out.min_bytes) + options.memory_budget * double(out.max_bytes - out.min_bytes);
    std::vector<const Value*> candidates;
    for (const Value* v : read_by_backward)
      if (again.count(v)) candidates.push_back(v);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Value* a, const Value* b) { return bytes_of(a) < bytes_of(b); });
    std::set<const Value*> trial_saved, trial_again;
    for (const Value* v : candidates) {
      std::set<const Value*> trial = preferred;
      trial.insert(v);
      if (double(settle(trial, trial_saved, trial_again)) <= limit) preferred = std::move(trial);
    }
  }
  out.saved_bytes = settle(preferred, saved, again);

  for (const Node* n : graph.nodes())
    for (const Value* v : n->outputs) {
      if (saved.count(to_joint.at(v))) out.saved.push_back(v);
      if (again.count(to_joint.at(v))) out.recomputed.push_back(v);
    }
  return out;
}

std::vector<const Value*> values_to_save(const Graph& graph, const std::vector<bool>& wrt,
                                         const PartitionOptions& options) {
  return partition_for_backward(graph, wrt, options).saved;
}

std::string print_partition(const Partition& partition) {
  std::string out;
  for (const Value* v : partition.saved)
    out += "save %" + std::to_string(v->id) + " " + std::string(op_name(v->producer->kind)) + " " + v->type.str() +
           " (" + std::to_string(bytes_of(v)) + " bytes)\n";
  for (const Value* v : partition.recomputed)
    out += "recompute %" + std::to_string(v->id) + " " + std::string(op_name(v->producer->kind)) + "\n";
  out += "saved " + std::to_string(partition.saved_bytes) + " bytes (min cut " + std::to_string(partition.min_bytes) +
         ", all read " + std::to_string(partition.max_bytes) + ")\n";
  return out;
}

}  // namespace kiln
