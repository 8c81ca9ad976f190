// cse: common subexpression elimination. A node with the same op, attributes (constants by
// literal value) and inputs as an earlier one is redirected to the earlier one, whose provenance
// gains the duplicate's origins. The duplicate is left unread; dce deletes it.
#include <functional>
#include <string_view>
#include <unordered_map>

#include "core/ir/text.h"
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {

namespace {

void hash_combine(size_t& seed, size_t v) { seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

// Equal nodes hash equally; the full comparison happens in same_computation.
size_t node_hash(const Node& n) {
  size_t h = std::hash<int>()(int(n.kind));
  for (const Value* v : n.inputs) hash_combine(h, std::hash<const void*>()(v));
  for (const auto& [name, attr] : n.attrs) {
    hash_combine(h, std::hash<std::string>()(name));
    if (const auto* lit = std::get_if<std::shared_ptr<const Literal>>(&attr)) {
      const auto& bytes = (*lit)->bytes;
      hash_combine(h, std::hash<std::string_view>()(
                          std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
    } else {
      hash_combine(h, std::hash<std::string>()(print_attr(attr)));
    }
  }
  return h;
}

bool same_computation(const Node& a, const Node& b) {
  if (a.kind != b.kind || a.inputs != b.inputs || a.outputs.size() != b.outputs.size()) return false;
  if (!(a.attrs == b.attrs)) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (!same_type(a.outputs[i]->type, b.outputs[i]->type)) return false;
  return true;
}

PassStats cse(Graph& graph) {
  int64_t merged = 0;
  std::unordered_map<size_t, std::vector<Node*>> seen;
  // A merged node's outputs map to the first one's. In topological order every reader comes
  // later, so each node's inputs are rewritten just before it is hashed: chains of duplicates
  // collapse in one walk, and the walk stays linear (replacing uses one at a time rescans the graph).
  std::unordered_map<const Value*, Value*> replaced;
  auto resolve = [&](Value* v) {
    auto it = replaced.find(v);
    return it == replaced.end() ? v : it->second;
  };
  for (Node* n : graph.nodes()) {
    for (Value*& in : n->inputs) in = resolve(in);
    std::vector<Node*>& bucket = seen[node_hash(*n)];
    Node* first = nullptr;
    for (Node* candidate : bucket)
      if (same_computation(*candidate, *n)) {
        first = candidate;
        break;
      }
    if (!first) {
      bucket.push_back(n);
      continue;
    }
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (first->outputs[i]->name.empty()) first->outputs[i]->name = n->outputs[i]->name;
      replaced[n->outputs[i]] = first->outputs[i];
    }
    first->provenance.merge(n->provenance);
    ++merged;
  }
  graph.replace_uses(replaced);  // the graph outputs
  return {{{"nodes_merged", merged}}};
}

}  // namespace

Pass cse_pass() {
  return {"cse", "merge nodes with the same op, attributes and inputs into the first one", cse};
}

}  // namespace kiln
