// infer-shapes: recomputes every node's output types from its inputs, in order, so types left
// stale by an edit (a replaced input, a changed attribute) are brought back in line.
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"
#include "core/support/error.h"

namespace kiln {

namespace {

PassStats infer_shapes(Graph& graph) {
  int64_t changed = 0;
  for (Node* n : graph.nodes()) {
    std::vector<TensorType> in_types;
    for (const Value* v : n->inputs) in_types.push_back(v->type);
    // Throws the op table's own message (op, input types, provenance) when the node is invalid.
    std::vector<TensorType> out_types = infer_types(n->kind, in_types, n->attrs, n->provenance);
    if (out_types.size() != n->outputs.size())
      throw Error(op_error(n->kind, in_types, n->provenance,
                           "node %" + std::to_string(n->id) + " has " +
                               std::to_string(n->outputs.size()) + " results, the op gives " +
                               std::to_string(out_types.size())));
    for (size_t i = 0; i < out_types.size(); ++i) {
      if (same_type(n->outputs[i]->type, out_types[i])) continue;
      n->outputs[i]->type = out_types[i];
      ++changed;
    }
  }
  return {{{"types_changed", changed}}};
}

}  // namespace

Pass infer_shapes_pass() {
  return {"infer-shapes", "recompute every node's output types with the op's shape rule",
          infer_shapes};
}

}  // namespace kiln
