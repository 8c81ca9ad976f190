// The graph IR: a Graph owns Values (typed tensors) and Nodes (op applications) in topological
// order. Nodes are appended through add_node, which runs the op's shape rule, so every Value has
// a checked type from the moment it exists.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/op.h"
#include "core/ir/provenance.h"
#include "core/ir/shape.h"

namespace kiln {

struct Node;

struct Value {
  int id = 0;              // unique within the graph; printed as %id
  TensorType type;
  Node* producer = nullptr;  // null for graph inputs
  int output_index = 0;
  std::string name;        // optional: input names, imported tensor names
};

struct Node {
  int id = 0;
  OpKind kind;
  AttrMap attrs;  // complete: defaults filled
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  Provenance provenance;

  Value* output(size_t i = 0) const { return outputs.at(i); }
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  Value* add_input(const TensorType& type, const std::string& name = "");
  // Checks arity and attributes, infers output types; throws kiln::Error naming the op, the input
  // types and the provenance's location.
  Node* add_node(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs = {},
                 const Provenance& provenance = {});
  // Adds a node whose outputs have the given types, without running the shape rule (the parser
  // uses this so the verifier can then judge the text as written).
  Node* add_node_typed(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs,
                       const std::vector<TensorType>& output_types, const Provenance& provenance);
  // A copy of `node` (from this graph or another) reading `inputs`: same op, attributes, output
  // types and names, and provenance. `mapping`, when given, receives node's outputs -> the copy's.
  Node* add_copy(const Node& node, const std::vector<Value*>& inputs,
                 std::map<const Value*, Value*>* mapping = nullptr);
  void set_outputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }
  void add_output(Value* v) { outputs_.push_back(v); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Nodes in topological order.
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size(); }
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }

  // A deep copy; `mapping`, when given, receives old value -> new value.
  Graph clone(std::map<const Value*, Value*>* mapping = nullptr) const;

  // The nodes that read v, in order.
  std::vector<Node*> users(const Value* v) const;
  // Removes nodes whose outputs nobody reads (not graph outputs); returns how many.
  size_t remove_dead_nodes();
  // Makes every reader of `from` (and the graph outputs) read `to` instead. One walk over the
  // nodes: a pass replacing many values gathers them and calls the map form once.
  void replace_uses(Value* from, Value* to);
  // Every key's readers read its value instead, in one walk; the values must not be keys.
  void replace_uses(const std::unordered_map<const Value*, Value*>& replacements);

 private:
  Value* new_value(const TensorType& type);

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  int next_value_id_ = 0;
  int next_node_id_ = 0;
};

}  // namespace kiln
