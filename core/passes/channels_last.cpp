// channels-last: convs and window pools the backend runs faster on channels-last activations take
// them ([N, H, W, C], attribute channels_last), between two permutes:
//
//   y = conv(x, w)   becomes   y = permute(conv{channels_last}(permute(x, to_last), w), to_first)
//
// Then each permute to channels-first sinks below the pointwise ops that read it, so that it meets
// the next such op's permute to channels-last and both vanish. Between two convs, a chain of
// activations and residual adds then runs channels-last with no layout change at all; a permute is
// left only where a value leaves the channels-last region (a reshape, a reduction, a graph output).
// A graph where no pair vanishes, or that would keep more layout changes than it has such ops, is
// left as it was.
// This is what PyTorch's channels_last memory format and onnxruntime's NCHWc transformer do for the
// same kernels. Weights keep their [O, C/groups, kh, kw] layout.
#include <algorithm>
#include <deque>
#include <set>
#include <unordered_map>

#include "core/passes/fusion.h"
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {
namespace {

const std::vector<int64_t> kToLast = {0, 2, 3, 1};   // [N, C, H, W] -> [N, H, W, C]
const std::vector<int64_t> kToFirst = {0, 3, 1, 2};  // [N, H, W, C] -> [N, C, H, W]

// Structural: records no shape guard.
bool is_one(const SymInt& d) { return d.is_static() && d.value() == 1; }

bool is_permute(const Node& n, const std::vector<int64_t>& dims) {
  return n.kind == OpKind::Permute && n.attrs.get_ints("dims") == dims;
}

// The node producing v when it is a permute to channels-first, else null.
const Node* to_first_producer(const Value* v) {
  return v->producer && is_permute(*v->producer, kToFirst) ? v->producer : nullptr;
}

// Permutes between channels-first and channels-last in `graph`.
int64_t layout_changes(const Graph& graph) {
  int64_t n = 0;
  for (const Node* node : graph.nodes()) n += is_permute(*node, kToLast) || is_permute(*node, kToFirst);
  return n;
}

bool is_candidate(const Node& n) {
  return (n.kind == OpKind::Conv || n.kind == OpKind::MaxPool || n.kind == OpKind::AvgPool) &&
         n.inputs[0]->type.rank() == 4 && !is_channels_last(n.attrs);
}

class ChannelsLast {
 public:
  ChannelsLast(Graph& graph, const std::function<bool(const Node&)>& wanted) : graph_(graph), wanted_(wanted) {}

  PassStats run() {
    std::deque<Node*> to_first;
    for (Node* n : graph_.nodes())
      if (is_candidate(*n) && wanted_(*n)) to_first.push_back(rewrite(*n));
    while (!to_first.empty()) {
      Node* p = to_first.front();
      to_first.pop_front();
      for (Node* user : graph_.users(p->output())) {
        if (replaced_.count(user)) continue;
        if (is_permute(*user, kToLast)) {
          graph_.replace_uses(user->output(), p->inputs[0]);
          replaced_.insert(user);
          ++cancelled_;
        } else if (Node* moved = sink(*user)) {
          to_first.push_back(moved);
        }
      }
    }
    PassStats stats;
    stats.counters["ops_channels_last"] = rewritten_;
    stats.counters["permutes_sunk"] = sunk_;
    stats.counters["permute_pairs_cancelled"] = cancelled_;
    return stats;
  }

  // Each added node's place: that of the original node it replaces (restore_topological_order).
  const std::unordered_map<const Node*, const Node*>& places() const { return stands_for_; }

 private:
  // Appends a node that takes the place of `original`.
  Node* add(const Node& original, OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs) {
    Node* n = graph_.add_node(kind, inputs, attrs, original.provenance);
    auto it = stands_for_.find(&original);
    stands_for_[n] = it == stands_for_.end() ? &original : it->second;
    return n;
  }

  // The op on channels-last activations between two permutes; returns the permute back.
  Node* rewrite(Node& n) {
    std::vector<Value*> inputs = n.inputs;
    inputs[0] = add(n, OpKind::Permute, {inputs[0]}, {{"dims", kToLast}})->output();
    AttrMap attrs = n.attrs;
    attrs.set("channels_last", true);
    Value* last = add(n, n.kind, inputs, attrs)->output();
    Node* back = add(n, OpKind::Permute, {last}, {{"dims", kToFirst}});
    graph_.replace_uses(n.output(), back->output());
    ++rewritten_;
    return back;
  }

  // A pointwise user of a permute to channels-first runs on the channels-last values instead, and
  // the permute moves below it. Every operand must have a channels-last form at no cost: another
  // permute's input, a value without spatial extent ([C, 1, 1] or [1, C, 1, 1], reshaped to
  // [1, 1, 1, C]), or one that broadcasts from all ones. Returns the new permute, or null.
  Node* sink(Node& user) {
    if (!is_elementwise(user) || user.output()->type.rank() != 4) return nullptr;
    const Shape& shape = user.output()->type.shape;
    std::vector<Value*> inputs;
    for (Value* v : user.inputs) {
      if (const Node* p = to_first_producer(v)) {
        if (!same_shape(v->type.shape, shape)) return nullptr;  // it would broadcast: keep the layout
        inputs.push_back(p->inputs[0]);
      } else if (std::optional<Shape> last = channels_last_broadcast(v->type.shape)) {
        inputs.push_back(same_shape(*last, v->type.shape) ? v : add(user, OpKind::Reshape, {v}, {{"shape", *last}})->output());
      } else {
        return nullptr;
      }
    }
    Node* moved = add(user, user.kind, inputs, user.attrs);
    Node* back = add(user, OpKind::Permute, {moved->output()}, {{"dims", kToFirst}});
    graph_.replace_uses(user.output(), back->output());
    replaced_.insert(&user);
    ++sunk_;
    return back;
  }

  // A channels-first operand's channels-last form when that is a reshape: no extent in H and W.
  static std::optional<Shape> channels_last_broadcast(const Shape& shape) {
    if (shape.size() > 4) return std::nullopt;
    Shape aligned(4 - shape.size(), SymInt(1));
    aligned.insert(aligned.end(), shape.begin(), shape.end());
    if (!is_one(aligned[2]) || !is_one(aligned[3])) return std::nullopt;
    bool ones = true;
    for (const SymInt& d : shape) ones = ones && is_one(d);
    if (ones) return shape;  // broadcasts the same either way
    return Shape{aligned[0], SymInt(1), SymInt(1), aligned[1]};
  }

  Graph& graph_;
  const std::function<bool(const Node&)>& wanted_;
  std::set<const Node*> replaced_;  // users already moved or cancelled: dead, removed at the end
  std::unordered_map<const Node*, const Node*> stands_for_;  // added node -> the original it replaces
  int64_t rewritten_ = 0, sunk_ = 0, cancelled_ = 0;
};

}  // namespace

Pass channels_last_pass(std::function<bool(const Node&)> wanted) {
  return {"channels-last",
          "convs and window pools the backend prefers so run channels-last; layout changes between them cancel",
          [wanted = std::move(wanted)](Graph& graph) {
            // Rewritten on a copy, kept only where it pays: some permute pair cancels (for a lone
            // conv the permutes would only replace the reorders oneDNN does itself), and at most
            // one layout change is left per op that runs channels-last. A training step's graph
            // (gradient ops between the convs read channels-first) would be left with more.
            const std::vector<Node*> nodes = graph.nodes();
            if (std::none_of(nodes.begin(), nodes.end(), [](const Node* n) { return is_candidate(*n); }))
              return PassStats{{{"ops_channels_last", 0}}};  // nothing to copy the graph for
            Graph trial = graph.clone();
            ChannelsLast pass(trial, wanted);
            PassStats stats = pass.run();
            if (stats.counters["permute_pairs_cancelled"] == 0) return PassStats{{{"ops_channels_last", 0}}};
            // The new nodes were appended: each goes where the node it replaces was, so fusion
            // still sees a conv and its activation side by side; dead-node removal needs the order.
            restore_topological_order(trial, pass.places());
            stats.counters["nodes_removed"] = int64_t(trial.remove_dead_nodes());
            const int64_t changes = layout_changes(trial) - layout_changes(graph);
            if (changes > stats.counters["ops_channels_last"])
              return PassStats{{{"ops_channels_last", 0}, {"layout_changes_it_would_leave", changes}}};
            stats.counters["layout_changes"] = changes;
            graph = std::move(trial);
            return stats;
          }};
}

}  // namespace kiln
