// Small graph-editing helpers the passes share: type and literal queries, and restoring
// topological order after a pass appended replacement nodes.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

#include "core/ir/graph.h"
#include "core/passes/pass.h"

namespace kiln {

// Structural equality: the same dim expressions (records no shape guard), and for types the same dtype.
bool same_shape(const Shape& a, const Shape& b);
bool same_type(const TensorType& a, const TensorType& b);
// The literal of a value produced by a `constant` node, else null.
const Literal* literal_of(const Value* v);
// True when every element of the literal equals `value` (0.0 matches -0.0; NaN never matches).
bool literal_is_splat(const Literal& lit, double value);

bool is_topologically_ordered(const Graph& graph);
// Rebuilds the graph with its nodes in a topological order that keeps the current relative order
// wherever it is already valid. No-op when the order is already valid; otherwise every Value* and
// Node* into the graph is invalidated (inputs and outputs keep their positions and names).
// `stands_for` maps a node appended in place of another to that one, whose place it then takes
// (nodes of one place keep their relative order): fusion groups consecutive nodes.
void restore_topological_order(Graph& graph, const std::unordered_map<const Node*, const Node*>& stands_for = {});

// A pass that replaces nodes by new ones appended at the graph's end (expand-ops,
// rewrite_nodes_pass): which node each appended one takes the place of, and which value replaces
// which.
struct Replacements {
  std::unordered_map<const Node*, const Node*> places;
  std::unordered_map<const Value*, Value*> values;
  // The nodes appended since the graph had `first` nodes take `replaced`'s place.
  void appended_since(const Graph& graph, size_t first, const Node& replaced);
  // Moves the readers of each replaced value to its replacement, puts the new nodes in their places
  // and deletes the nodes nothing reads any more; returns how many.
  int64_t apply(Graph& graph) const;
};

class GradBuilder;

// A pass that replaces each one-output node `picked` selects by the value `rewrite` builds in its
// place (through a builder whose nodes keep the node's provenance; nullptr, having built nothing,
// keeps the node): winograd and conv-as-matmul. Counts the nodes rewritten under `counter`, and
// "nodes_removed".
Pass rewrite_nodes_pass(std::string name, std::string summary, std::string counter,
                        std::function<bool(const Node&)> picked,
                        std::function<Value*(GradBuilder&, const Node&)> rewrite);

}  // namespace kiln
