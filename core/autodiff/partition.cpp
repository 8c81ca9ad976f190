// values_to_save: the gradient graph's reads of forward values, with cheap ops recomputed.
#include "core/autodiff/partition.h"

#include <map>
#include <set>

#include "core/autodiff/reverse.h"
#include "core/ir/op.h"

namespace kiln {
namespace {

// Ops a backward recomputes rather than saves: elementwise maps, views and constants.
bool recomputed(const Node& node) {
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

}  // namespace

std::vector<const Value*> values_to_save(const Graph& graph, const std::vector<bool>& wrt) {
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

  // What the gradient nodes read from the forward, then recomputed values' operands in turn. The
  // function's outputs are at hand (saved with the call), so nothing behind them is recomputed.
  std::set<const Value*> outputs, joint_outputs;
  for (const Value* v : graph.outputs()) {
    outputs.insert(v);
    joint_outputs.insert(to_joint.at(v));
  }
  std::set<const Value*> needed, saved;
  std::vector<const Value*> work;
  for (const Node* n : joint.nodes()) {
    if (forward_nodes.count(n)) continue;
    for (const Value* in : n->inputs)
      if (in->producer && forward_nodes.count(in->producer) && needed.insert(in).second) work.push_back(in);
  }
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (joint_outputs.count(v)) continue;
    if (!recomputed(*v->producer)) {
      saved.insert(v);
      continue;
    }
    for (const Value* in : v->producer->inputs)
      if (in->producer && needed.insert(in).second) work.push_back(in);
  }
  std::vector<const Value*> result;
  for (const Node* n : graph.nodes())
    for (const Value* v : n->outputs)
      if (saved.count(to_joint.at(v)) && !outputs.count(v)) result.push_back(v);
  return result;
}

}  // namespace kiln
