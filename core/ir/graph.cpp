// Graph construction and the small edits passes need.
#include "core/ir/graph.h"

#include <algorithm>
#include <set>

namespace kiln {

Value* Graph::new_value(const TensorType& type) {
  auto v = std::make_unique<Value>();
  v->id = next_value_id_++;
  v->type = type;
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::add_input(const TensorType& type, const std::string& name) {
  Value* v = new_value(type);
  v->name = name;
  inputs_.push_back(v);
  return v;
}

Node* Graph::add_node(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs,
                      const Provenance& provenance) {
  std::vector<TensorType> in_types;
  in_types.reserve(inputs.size());
  for (const Value* v : inputs) in_types.push_back(v->type);
  AttrMap full;
  std::vector<TensorType> out_types = infer_types(kind, in_types, attrs, provenance, &full);
  return add_node_typed(kind, inputs, full, out_types, provenance);
}

Node* Graph::add_node_typed(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs,
                            const std::vector<TensorType>& output_types,
                            const Provenance& provenance) {
  auto n = std::make_unique<Node>();
  n->id = next_node_id_++;
  n->kind = kind;
  n->attrs = attrs;
  n->inputs = inputs;
  n->provenance = provenance;
  for (size_t i = 0; i < output_types.size(); ++i) {
    Value* v = new_value(output_types[i]);
    v->producer = n.get();
    v->output_index = int(i);
    n->outputs.push_back(v);
  }
  nodes_.push_back(std::move(n));
  return nodes_.back().get();
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Node* Graph::add_copy(const Node& node, const std::vector<Value*>& inputs, std::map<const Value*, Value*>* mapping) {
  std::vector<TensorType> types;
  for (const Value* v : node.outputs) types.push_back(v->type);
  Node* copy = add_node_typed(node.kind, inputs, node.attrs, types, node.provenance);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    copy->outputs[i]->name = node.outputs[i]->name;
    if (mapping) (*mapping)[node.outputs[i]] = copy->outputs[i];
  }
  return copy;
}

Graph Graph::clone(std::map<const Value*, Value*>* mapping) const {
  Graph out;
  std::map<const Value*, Value*> map;
  for (const Value* v : inputs_) map[v] = out.add_input(v->type, v->name);
  for (const auto& n : nodes_) {
    std::vector<Value*> ins;
    for (const Value* v : n->inputs) ins.push_back(map.at(v));
    out.add_copy(*n, ins, &map);
  }
  for (const Value* v : outputs_) out.outputs_.push_back(map.at(v));
  if (mapping) *mapping = std::move(map);
  return out;
}

std::vector<Node*> Graph::users(const Value* v) const {
  std::vector<Node*> out;
  for (const auto& n : nodes_)
    if (std::find(n->inputs.begin(), n->inputs.end(), v) != n->inputs.end()) out.push_back(n.get());
  return out;
}

size_t Graph::remove_dead_nodes() {
  std::set<const Value*> live(outputs_.begin(), outputs_.end());
  std::vector<bool> keep(nodes_.size(), false);
  for (size_t i = nodes_.size(); i-- > 0;) {
    const Node& n = *nodes_[i];
    for (const Value* o : n.outputs)
      if (live.count(o)) keep[i] = true;
    if (keep[i])
      for (const Value* in : n.inputs) live.insert(in);
  }
  size_t removed = 0;
  std::vector<std::unique_ptr<Node>> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (keep[i]) {
      kept.push_back(std::move(nodes_[i]));
    } else {
      ++removed;
      for (Value* o : nodes_[i]->outputs) o->producer = nullptr;
    }
  }
  nodes_ = std::move(kept);
  return removed;
}

void Graph::replace_uses(Value* from, Value* to) {
  for (auto& n : nodes_)
    std::replace(n->inputs.begin(), n->inputs.end(), from, to);
  std::replace(outputs_.begin(), outputs_.end(), from, to);
}

void Graph::replace_uses(const std::unordered_map<const Value*, Value*>& replacements) {
  if (replacements.empty()) return;
  auto replace = [&](Value*& v) {
    auto it = replacements.find(v);
    if (it != replacements.end()) v = it->second;
  };
  for (auto& n : nodes_)
    for (Value*& v : n->inputs) replace(v);
  for (Value*& v : outputs_) replace(v);
}

}  // namespace kiln
