// add_gradients: one backward walk over the nodes in reverse order, accumulating each value's
// gradient and asking every node on a path from `wrt` to an output for its inputs' gradients.
#include "core/autodiff/reverse.h"

#include <map>
#include <set>

#include "core/ir/grad_builder.h"
#include "core/support/error.h"

namespace kiln {
namespace {

bool one_element(const TensorType& t) {
  for (const SymInt& d : t.shape)
    if (!d.is_static() || d.value() != 1) return false;
  return true;
}

std::vector<TensorType> input_types(const Node& n) {
  std::vector<TensorType> types;
  for (const Value* v : n.inputs) types.push_back(v->type);
  return types;
}

// Values that depend on a `wrt` value through ops that pass gradients.
std::set<const Value*> values_needing_grad(const std::vector<Node*>& nodes, const std::vector<Value*>& wrt) {
  std::set<const Value*> needs(wrt.begin(), wrt.end());
  for (const Node* n : nodes) {
    if (op_def(n->kind).gradient == Gradient::None) continue;
    bool any = false;
    for (const Value* v : n->inputs) any = any || needs.count(v);
    if (!any) continue;
    for (const Value* v : n->outputs)
      if (is_floating(v->type.dtype)) needs.insert(v);
  }
  return needs;
}

}  // namespace

std::vector<Value*> add_gradients(Graph& graph, const GradientRequest& request) {
  const std::vector<Node*> forward = graph.nodes();  // before any gradient node is added
  std::set<const Value*> needs = values_needing_grad(forward, request.wrt);
  std::map<const Value*, Value*> grads;
  auto accumulate = [&](const Value* v, Value* g, const Provenance& where) {
    auto [it, fresh] = grads.emplace(v, g);
    if (!fresh) it->second = graph.add_node(OpKind::Add, {it->second, g}, {}, where)->output();
  };

  for (size_t i = 0; i < request.outputs.size(); ++i) {
    Value* out = request.outputs[i];
    Value* seed = i < request.seeds.size() ? request.seeds[i] : nullptr;
    if (!seed) {
      if (!one_element(out->type))
        throw Error("backward: the differentiated value %" + std::to_string(out->id) + " is " +
                    out->type.str() + (out->producer ? " (from '" + std::string(op_name(out->producer->kind)) +
                                                           "' at " + out->producer->provenance.str() + ")"
                                                     : std::string()) +
                    "; a value of more than one element needs an explicit gradient of its shape");
      seed = add_filled(graph, 1.0, out->type, Provenance{}.gradient_of("backward"));
    }
    accumulate(out, seed, Provenance{}.gradient_of("backward"));
  }

  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Node& node = **it;
    std::vector<Value*> out_grads;
    bool any_grad = false;
    for (const Value* v : node.outputs) {
      auto g = grads.find(v);
      out_grads.push_back(g == grads.end() ? nullptr : g->second);
      any_grad = any_grad || g != grads.end();
    }
    std::vector<bool> wanted;
    bool any_wanted = false;
    for (const Value* v : node.inputs) {
      wanted.push_back(needs.count(v) != 0);
      any_wanted = any_wanted || wanted.back();
    }
    if (!any_grad || !any_wanted) continue;
    const OpDef& def = op_def(node.kind);
    if (def.gradient == Gradient::None) continue;
    if (def.gradient == Gradient::Missing || !def.vjp)
      throw Error(op_error(node.kind, input_types(node), node.provenance,
                           "the backward needs this op's gradient, and kiln has no gradient rule for '" +
                               std::string(op_name(node.kind)) + "' yet"));
    GradBuilder builder(graph, node, out_grads, wanted);
    std::vector<Value*> in_grads = def.vjp(builder);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!wanted[i] || i >= in_grads.size() || !in_grads[i]) continue;
      const TensorType& want = node.inputs[i]->type;
      if (in_grads[i]->type.dtype != want.dtype || shape_str(in_grads[i]->type.shape) != shape_str(want.shape))
        throw Error(op_error(node.kind, input_types(node), node.provenance,
                             "internal error: the gradient rule gave input " + std::to_string(i) + " a " +
                                 in_grads[i]->type.str() + " gradient for a " + want.str() + " input"));
      accumulate(node.inputs[i], in_grads[i], node.provenance.gradient_of(op_name(node.kind)));
    }
  }

  std::vector<Value*> result;
  for (Value* w : request.wrt) {
    auto g = grads.find(w);  // zeros where nothing connects w to an output
    result.push_back(g != grads.end() ? g->second : add_filled(graph, 0.0, w->type, Provenance{}.gradient_of("backward")));
  }
  return result;
}

Pass autodiff_pass() {
  return {"autodiff", "appends the gradient of output 0 with respect to every floating-point input",
          [](Graph& graph) {
            if (graph.outputs().empty()) throw Error("autodiff: the graph has no output to differentiate");
            GradientRequest request;
            request.outputs = {graph.outputs()[0]};
            for (Value* in : graph.inputs())
              if (is_floating(in->type.dtype)) request.wrt.push_back(in);
            size_t before = graph.num_nodes();
            for (Value* g : add_gradients(graph, request)) graph.add_output(g);
            PassStats stats;
            stats.counters["gradient_nodes"] = int64_t(graph.num_nodes() - before);
            return stats;
          }};
}

}  // namespace kiln
