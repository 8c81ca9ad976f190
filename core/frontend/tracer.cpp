// Tracing: op calls become graph nodes.
#include "core/frontend/tracer.h"

#include "core/support/error.h"

namespace kiln {

Tracer::Tracer(Device device) : device_(device) {}

Tensor Tracer::input(const TensorType& type, const std::string& name) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = type;
  impl->device = device_;
  impl->value = graph_.add_input(type, name);
  impl->tracer = this;
  return Tensor(std::move(impl));
}

Value* Tracer::value_of(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (impl.tracer == this) return impl.value;
  if (impl.tracer != nullptr)
    throw Error("a tensor from another trace was used here; tensors cannot cross compiled functions");
  for (const auto& [value, tensor] : captured_)
    if (tensor.impl_ptr() == t.impl_ptr()) return value;
  Value* v = graph_.add_input(impl.type, "captured" + std::to_string(captured_.size()));
  captured_.emplace_back(v, t);
  return v;
}

std::vector<Tensor> Tracer::record(OpKind kind, const std::vector<Tensor>& inputs,
                                   const AttrMap& attrs, const Provenance& provenance) {
  std::vector<Value*> values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs) values.push_back(value_of(t));
  Node* node = graph_.add_node(kind, values, attrs, provenance);
  std::vector<Tensor> out;
  for (Value* v : node->outputs) {
    auto impl = std::make_shared<TensorImpl>();
    impl->type = v->type;
    impl->device = device_;
    impl->value = v;
    impl->tracer = this;
    if (lazy) made_.push_back(impl);
    out.emplace_back(std::move(impl));
  }
  return out;
}

void Tracer::set_outputs(const std::vector<Tensor>& outputs) {
  std::vector<Value*> values;
  for (const Tensor& t : outputs) values.push_back(value_of(t));
  graph_.set_outputs(values);
}

}  // namespace kiln
