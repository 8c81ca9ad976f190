// What a gradient rule (OpDef::vjp) sees and builds with: the forward node, the gradients of its
// outputs, and a builder that adds ordinary graph nodes carrying the forward node's provenance,
// marked as its gradient. The reverse-mode transform (core/autodiff/reverse.h) drives it.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/ir/op.h"

namespace kiln {

// A `type` value filled with `value`: one rank-0 constant, expanded unless `type` is rank 0
// (symbolic dims stay symbolic).
Value* add_filled(Graph& graph, double value, const TensorType& type, const Provenance& provenance);

// Gives `kind` its gradient rule (the rule files call it for each op they cover).
void set_rule(std::vector<OpDef>& table, OpKind kind, VjpFn rule);

class GradBuilder {
 public:
  // `output_grads`: one per output of `node`, nullptr where no gradient reaches it. `wanted`: per
  // input, whether a gradient is needed (rules may skip building the others).
  GradBuilder(Graph& graph, const Node& node, std::vector<Value*> output_grads, std::vector<bool> wanted);
  // For an op's expansion (OpDef::expand): the nodes it builds keep `node`'s own provenance.
  static GradBuilder expanding(Graph& graph, const Node& node);

  const Node& node() const { return node_; }
  Value* input(size_t i) const { return node_.inputs.at(i); }
  Value* output(size_t i = 0) const { return node_.outputs.at(i); }
  // The gradient of output i: zeros of its type where none reached it.
  Value* grad(size_t i = 0);
  bool has_grad(size_t i) const { return output_grads_.at(i) != nullptr; }
  bool wanted(size_t i) const { return i < wanted_.size() && wanted_[i]; }
  const AttrMap& attrs() const { return attrs_; }  // the forward node's, defaults filled

  // A node of the gradient (the provenance is the forward node's, marked as its gradient).
  Value* op(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs = {});
  // The same, for an op with several outputs (split).
  std::vector<Value*> op_outputs(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs = {});
  // A rank-0 constant of `dtype`.
  Value* scalar(double value, DType dtype);
  // Zeros of `type` (a scalar expanded: symbolic dims stay symbolic).
  Value* zeros(const TensorType& type);
  // Undoes broadcasting: `g` summed over the dims a `shape` operand was broadcast along, then
  // reshaped to `shape`. Returns g itself when the shapes already agree.
  Value* sum_to(Value* g, const Shape& shape);
  // Casts `v` to `dtype` unless it already is.
  Value* cast_to(Value* v, DType dtype);
  // Data movement and sums, as their ops; reshape returns `v` itself when the shape agrees.
  Value* reshape(Value* v, const Shape& shape);
  Value* permute(Value* v, const std::vector<int64_t>& dims);
  Value* expand(Value* v, const Shape& shape);
  Value* sum(Value* v, const std::vector<int64_t>& dims, bool keepdim);
  Value* mean(Value* v, const std::vector<int64_t>& dims, bool keepdim);
  // Constant padding (negative pads crop), in the pad op's order: every begin, then every end.
  Value* pad(Value* v, const std::vector<int64_t>& pads, double value = 0);
  // Static slicing of `axes` from `starts` (inclusive) to `ends` (exclusive) by `steps`.
  Value* slice(Value* v, const std::vector<int64_t>& axes, const std::vector<int64_t>& starts,
               const std::vector<int64_t>& ends, const std::vector<int64_t>& steps);
  // `v` with its elements `steps` apart along `axes`, zeros between: the adjoint of a strided slice
  // from 0 (each axis of n elements becomes n * step long).
  Value* dilate(Value* v, const std::vector<int64_t>& axes, const std::vector<int64_t>& steps);
  // A constant tensor of `dims` holding `values` (row-major), converted to `dtype`.
  Value* constant(const std::vector<double>& values, const std::vector<int64_t>& dims, DType dtype);
  // Dim `dim` of `v`, which the rule needs as a number: raises the rule's error when it is symbolic.
  int64_t static_dim(const Value* v, int64_t dim, const std::string& what) const;
  // Raises kiln::Error naming the op, its input types and the forward node's source line.
  [[noreturn]] void fail(const std::string& why) const;

 private:
  Graph& graph_;
  const Node& node_;
  std::vector<Value*> output_grads_;
  std::vector<bool> wanted_;
  AttrMap attrs_;
  Provenance provenance_;
};

}  // namespace kiln
