// expand-ops: ops the backend has no fast kernels for become their expansions (OpDef::expand), the
// ops the backend does run fast. A conv's input and weight gradients (conv_transpose,
// conv_weight_grad) run as oneDNN primitives on cpu, and as a conv and a matmul on the templates of
// Vulkan and CUDA. A split becomes one slice per piece: views, which fusion moves into their
// readers or a matmul template reads in place.
#include <unordered_map>

#include "core/ir/grad_builder.h"
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {

Pass expand_ops_pass(std::function<bool(const Node&)> keep) {
  return {"expand-ops", "ops the backend has no fast kernels for, written in ops it has",
          [keep = std::move(keep)](Graph& graph) {
            Replacements replacements;
            int64_t expanded = 0;
            for (Node* node : graph.nodes()) {
              const OpDef& def = op_def(node->kind);
              if (!def.expand || keep(*node)) continue;
              const size_t before = graph.num_nodes();
              GradBuilder builder = GradBuilder::expanding(graph, *node);
              const std::vector<Value*> expansion = def.expand(builder);
              replacements.appended_since(graph, before, *node);
              if (expansion.empty() || expansion.size() != node->outputs.size()) continue;
              ++expanded;
              for (size_t i = 0; i < expansion.size(); ++i) replacements.values[node->outputs[i]] = expansion[i];
            }
            PassStats stats;
            stats.counters["ops_expanded"] = expanded;
            if (!replacements.places.empty()) stats.counters["nodes_removed"] = replacements.apply(graph);
            return stats;
          }};
}

}  // namespace kiln
