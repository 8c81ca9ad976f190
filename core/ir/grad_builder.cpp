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

void set_rule(std::vector<OpDef>& table, OpKind kind, VjpFn rule) {
  table[size_t(kind)].gradient = Gradient::Rule;
  table[size_t(kind)].vjp = std::move(rule);
}

GradBuilder::GradBuilder(Graph& graph, const Node& node, std::vector<Value*> output_grads,
                         std::vector<bool> wanted)
    : graph_(graph),
      node_(node),
      output_grads_(std::move(output_grads)),
      wanted_(std::move(wanted)),
      attrs_(complete_attrs(node.kind, node.attrs, node.provenance)),
      provenance_(node.provenance.gradient_of(op_name(node.kind))) {}

GradBuilder GradBuilder::expanding(Graph& graph, const Node& node) {
  GradBuilder b(graph, node, std::vector<Value*>(node.outputs.size(), nullptr),
                std::vector<bool>(node.inputs.size(), true));
  b.provenance_ = node.provenance;
  return b;
}

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
  return reshape(dims.empty() ? g : sum(g, dims, false), shape);
}

Value* GradBuilder::cast_to(Value* v, DType dtype) {
  if (v->type.dtype == dtype) return v;
  AttrMap attrs;
  attrs.set("dtype", dtype);
  return op(OpKind::Cast, {v}, attrs);
}

Value* GradBuilder::reshape(Value* v, const Shape& shape) {
  if (shape_str(v->type.shape) == shape_str(shape)) return v;
  return op(OpKind::Reshape, {v}, {{"shape", shape}});
}

Value* GradBuilder::permute(Value* v, const std::vector<int64_t>& dims) {
  return op(OpKind::Permute, {v}, {{"dims", dims}});
}

Value* GradBuilder::expand(Value* v, const Shape& shape) {
  return op(OpKind::Expand, {v}, {{"shape", shape}});
}

Value* GradBuilder::sum(Value* v, const std::vector<int64_t>& dims, bool keepdim) {
  return op(OpKind::Sum, {v}, {{"dims", dims}, {"keepdim", keepdim}});
}

Value* GradBuilder::mean(Value* v, const std::vector<int64_t>& dims, bool keepdim) {
  return op(OpKind::Mean, {v}, {{"dims", dims}, {"keepdim", keepdim}});
}

Value* GradBuilder::pad(Value* v, const std::vector<int64_t>& pads, double value) {
  return op(OpKind::Pad, {v}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", value}});
}

Value* GradBuilder::slice(Value* v, const std::vector<int64_t>& axes, const std::vector<int64_t>& starts,
                          const std::vector<int64_t>& ends, const std::vector<int64_t>& steps) {
  return op(OpKind::Slice, {v}, {{"axes", axes}, {"starts", starts}, {"ends", ends}, {"steps", steps}});
}

Value* GradBuilder::dilate(Value* v, const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  // [.., n, ..] -> [.., n, 1, ..], padded at the end to [.., n, step, ..], then merged to n * step.
  const Shape& shape = v->type.shape;
  Shape spread, merged;
  std::vector<int64_t> end_pads;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t step = 1;
    for (size_t i = 0; i < axes.size(); ++i)
      if (size_t(axes[i]) == d) step = steps[i];
    spread.push_back(shape[d]);
    end_pads.push_back(0);
    merged.push_back(step > 1 ? shape[d] * SymInt(step) : shape[d]);
    if (step > 1) {
      spread.push_back(1);
      end_pads.push_back(step - 1);
    }
  }
  if (spread.size() == shape.size()) return v;
  std::vector<int64_t> pads(spread.size(), 0);
  pads.insert(pads.end(), end_pads.begin(), end_pads.end());
  return reshape(pad(reshape(v, spread), pads), merged);
}

Value* GradBuilder::constant(const std::vector<double>& values, const std::vector<int64_t>& dims, DType dtype) {
  auto lit = std::make_shared<Literal>();
  lit->dtype = dtype;
  lit->shape = dims;
  lit->bytes.resize(values.size() * dtype_size(dtype));
  convert_elements(values.data(), DType::F64, lit->bytes.data(), dtype, values.size());
  return op(OpKind::Constant, {}, {{"value", std::shared_ptr<const Literal>(lit)}});
}

int64_t GradBuilder::static_dim(const Value* v, int64_t dim, const std::string& what) const {
  const SymInt& d = v->type.shape.at(size_t(dim));
  if (!d.is_static())
    fail("the gradient needs the " + what + "'s size along dim " + std::to_string(dim) + " as a number, got " +
         v->type.str() + "; symbolic sizes here are not supported yet");
  return d.value();
}

void GradBuilder::fail(const std::string& why) const {
  std::vector<TensorType> types;
  for (const Value* v : node_.inputs) types.push_back(v->type);
  throw Error(op_error(node_.kind, types, node_.provenance, why));
}

}  // namespace kiln
