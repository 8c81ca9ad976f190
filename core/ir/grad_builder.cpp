// GradBuilder: node construction for gradient rules.
#include "core/ir/grad_builder.h"

#include <memory>

#include "core/support/error.h"

namespace kiln {

Value* add_filled(Graph& graph, double value, const TensorType& type, const Provenance& provenance) {
  auto lit = std::make_shared<Literal>();
  lit->dtype = type.dtype;
  lit->bytes.resize(dtype_size(type.dtype));
  convert_elements(&value, DType::F64, lit->bytes.data(), type.dtype, 1);
  Value* scalar = graph.add_node(OpKind::Constant, {}, {{"value", std::shared_ptr<const Literal>(lit)}}, provenance)->output();
  if (type.shape.empty()) return scalar;
  return graph.add_node(OpKind::Expand, {scalar}, {{"shape", type.shape}}, provenance)->output();
}

GradBuilder::GradBuilder(Graph& graph, const Node& node, std::vector<Value*> output_grads,
                         std::vector<bool> wanted)
    : graph_(graph),
      node_(node),
      output_grads_(std::move(output_grads)),
      wanted_(std::move(wanted)),
      attrs_(complete_attrs(node.kind, node.attrs, node.provenance)),
      provenance_(node.provenance.gradient_of(op_name(node.kind))) {}

Value* GradBuilder::grad(size_t i) {
  if (!output_grads_.at(i)) output_grads_[i] = zeros(output(i)->type);
  return output_grads_[i];
}

Value* GradBuilder::op(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs) {
  return graph_.add_node(kind, inputs, attrs, provenance_)->output();
}

std::vector<Value*> GradBuilder::op_outputs(OpKind kind, const std::vector<Value*>& inputs,
                                            const AttrMap& attrs) {
  return graph_.add_node(kind, inputs, attrs, provenance_)->outputs;
}

Value* GradBuilder::scalar(double value, DType dtype) { return add_filled(graph_, value, {dtype, {}}, provenance_); }

Value* GradBuilder::zeros(const TensorType& type) { return add_filled(graph_, 0.0, type, provenance_); }

Value* GradBuilder::sum_to(Value* g, const Shape& shape) {
  const Shape& from = g->type.shape;
  if (shape_str(from) == shape_str(shape)) return g;
  // Broadcasting aligns trailing dims: leading extra dims, and dims that are 1 in `shape` but not
  // in `from`, were broadcast.
  const size_t lead = from.size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < from.size(); ++d) {
    if (d < lead) {
      dims.push_back(int64_t(d));
      continue;
    }
    const SymInt& want = shape[d - lead];
    if (want.is_static() && want.value() == 1 && !(from[d].is_static() && from[d].value() == 1))
      dims.push_back(int64_t(d));
  }
  Value* summed = g;
  if (!dims.empty()) {
    AttrMap attrs;
    attrs.set("dims", dims);
    attrs.set("keepdim", false);
    summed = op(OpKind::Sum, {g}, attrs);
  }
  if (shape_str(summed->type.shape) == shape_str(shape)) return summed;
  AttrMap attrs;
  attrs.set("shape", shape);
  return op(OpKind::Reshape, {summed}, attrs);
}

Value* GradBuilder::cast_to(Value* v, DType dtype) {
  if (v->type.dtype == dtype) return v;
  AttrMap attrs;
  attrs.set("dtype", dtype);
  return op(OpKind::Cast, {v}, attrs);
}

void GradBuilder::fail(const std::string& why) const {
  std::vector<TensorType> types;
  for (const Value* v : node_.inputs) types.push_back(v->type);
  throw Error(op_error(node_.kind, types, node_.provenance, why));
}

}  // namespace kiln
