// Tracing: op calls become graph nodes.
#include "core/frontend/tracer.h"

#include "core/support/error.h"

namespace kiln {

namespace {
thread_local Tracer* t_compiling = nullptr;
}  // namespace

Tracer* compiling_tracer() { return t_compiling; }

CompilingScope::CompilingScope(Tracer& tracer) : previous_(t_compiling) { t_compiling = &tracer; }
CompilingScope::~CompilingScope() { t_compiling = previous_; }

Tracer::Tracer(Device device) : device_(device) {}

Tracer::~Tracer() {
  for (auto& [target, before] : grads_before_) target.impl().grad = before;
}

void Tracer::write(const Tensor& target, const Tensor& value) {
  if (target.is_traced())
    throw Error("a traced tensor cannot be updated in place; only eager tensors (parameters, optimizer "
                "state) can be written by a compiled function");
  writes_.push_back({target, value_of(value), false});
}

void Tracer::write_grad(const Tensor& target, const Tensor& grad) {
  if (!wrote_grad(target)) grads_before_.emplace_back(target, target.impl().grad);
  writes_.push_back({target, grad.defined() ? value_of(grad) : nullptr, true});
}

bool Tracer::wrote_grad(const Tensor& target) const {
  for (const auto& [t, before] : grads_before_)
    if (t.impl_ptr() == target.impl_ptr()) return true;
  return false;
}

Tensor Tracer::tensor_of(Value* value) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = value->type;
  impl->device = device_;
  impl->value = value;
  impl->tracer = this;
  return Tensor(std::move(impl));
}

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
  if (impl.tracer != nullptr && captures_traced) return captured_input(t);
  if (impl.tracer != nullptr)
    throw Error("a tensor from another trace was used here; tensors cannot cross compiled functions");
  for (auto w = writes_.rbegin(); w != writes_.rend(); ++w)  // written earlier in the trace
    if (!w->grad && w->target.impl_ptr() == t.impl_ptr()) return w->value;
  return captured_input(t);
}

Value* Tracer::captured_input(const Tensor& t) {
  for (const auto& [value, tensor] : captured_)
    if (tensor.impl_ptr() == t.impl_ptr()) return value;
  Value* v = graph_.add_input(t.impl().type, "captured" + std::to_string(captured_.size()));
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
    out.push_back(tensor_of(v));
    if (lazy) made_.push_back(out.back().impl_ptr());
  }
  return out;
}

void Tracer::set_outputs(const std::vector<Tensor>& outputs) {
  std::vector<Value*> values;
  for (const Tensor& t : outputs) values.push_back(value_of(t));
  graph_.set_outputs(values);
}

}  // namespace kiln
