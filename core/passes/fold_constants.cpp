// fold-constants: a node whose inputs are all constants is run once, now, by the evaluator the
// pipeline hands it (the reference kernels), and becomes a constant holding the result.
// Its provenance becomes the union of the folded nodes' origins, so the debugger can still point a
// constant back at every line that computed it.
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {

namespace {

bool has_symbolic_attr(const AttrMap& attrs) {
  for (const auto& [name, attr] : attrs)
    if (const auto* syms = std::get_if<std::vector<SymInt>>(&attr))
      for (const SymInt& s : *syms)
        if (!s.is_static()) return true;
  return false;
}

class ConstantFolder {
 public:
  ConstantFolder(Graph& graph, const ConstantEvaluator& evaluate, int64_t max_elements)
      : graph_(graph), evaluate_(evaluate), max_elements_(max_elements) {}

  PassStats run() {
    bool appended = false;
    for (Node* n : graph_.nodes()) {
      if (!foldable(*n)) continue;
      std::vector<std::shared_ptr<const Literal>> results;
      if (!evaluate(*n, &results)) continue;
      Provenance provenance;
      for (const Value* in : n->inputs) provenance.merge(in->producer->provenance);
      provenance.merge(n->provenance);
      if (results.size() == 1) {
        // Rewritten in place: the result Value (and so every reader) stays where it is.
        n->kind = OpKind::Constant;
        n->inputs.clear();
        n->attrs = AttrMap{{"value", results[0]}};
        n->provenance = provenance;
      } else {
        for (size_t i = 0; i < results.size(); ++i) {
          Node* c = graph_.add_node_typed(OpKind::Constant, {}, {{"value", results[i]}},
                                          {n->outputs[i]->type}, provenance);
          c->outputs[0]->name = n->outputs[i]->name;
          graph_.replace_uses(n->outputs[i], c->outputs[0]);
        }
        appended = true;
      }
      ++folded_;
    }
    // Constants made for multi-result nodes were appended after their readers.
    if (appended) restore_topological_order(graph_);
    return {{{"nodes_folded", folded_}, {"skipped_too_large", too_large_}, {"skipped_failed", failed_}}};
  }

 private:
  bool foldable(const Node& n) {
    if (n.kind == OpKind::Constant || n.inputs.empty()) return false;
    // A loop may run any number of iterations: that time belongs to the run, not to the compile.
    if (op_def(n.kind).family == OpFamily::Control) return false;
    for (const Value* in : n.inputs)
      if (!literal_of(in)) return false;
    if (has_symbolic_attr(n.attrs)) return false;
    for (const Value* out : n.outputs) {
      if (!is_static(out->type.shape)) return false;
      if (numel(out->type.shape).value() > max_elements_) {
        ++too_large_;
        return false;
      }
    }
    return true;
  }

  // A kernel that fails (integer division by zero, an op the cpu lacks) leaves the node as it is,
  // so the same error surfaces when the graph runs, with its provenance.
  bool evaluate(const Node& n, std::vector<std::shared_ptr<const Literal>>* results) {
    try {
      std::vector<const Literal*> args;
      for (const Value* in : n.inputs) args.push_back(literal_of(in));
      *results = evaluate_(n, args);
    } catch (const Error& e) {
      log::debug(std::string("fold-constants: not folding, the evaluator failed: ") + e.what());
      ++failed_;
      return false;
    }
    for (size_t i = 0; i < results->size(); ++i) {
      TensorType got{(*results)[i]->dtype, make_shape((*results)[i]->shape)};
      if (!same_type(got, n.outputs[i]->type)) {
        log::debug("fold-constants: not folding node %" + std::to_string(n.id) + ": result " +
                   got.str() + " differs from its declared type " + n.outputs[i]->type.str());
        ++failed_;
        return false;
      }
    }
    return true;
  }

  Graph& graph_;
  const ConstantEvaluator& evaluate_;
  int64_t max_elements_;
  int64_t folded_ = 0, too_large_ = 0, failed_ = 0;
};

}  // namespace

Pass fold_constants_pass(ConstantEvaluator evaluate, int64_t max_elements) {
  return {"fold-constants",
          "evaluate nodes whose inputs are all constants (up to " + std::to_string(max_elements) +
              " elements per result) and replace them by constants",
          [evaluate = std::move(evaluate), max_elements](Graph& graph) {
            return ConstantFolder(graph, evaluate, max_elements).run();
          }};
}

}  // namespace kiln
