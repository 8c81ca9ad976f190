// run_op: validation, then eager execution on the device or recording into the trace.
#include "core/frontend/dispatch.h"

#include <cmath>

#include "core/frontend/autograd.h"
#include "core/frontend/lazy.h"
#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"
#include "core/runtime/checked.h"

namespace kiln {
namespace {

thread_local OpObserver t_observer;

Tracer* tracer_of(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.is_traced()) return t.impl().tracer;
  return nullptr;
}

std::vector<Tensor> run_eager(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                              const std::vector<TensorType>& in_types,
                              const std::vector<TensorType>& out_types, const Provenance& where) {
  Device device = inputs.empty() ? Device::cpu() : inputs[0].device();
  for (const Tensor& t : inputs)
    if (t.device() != device)
      throw Error(op_error(kind, in_types, where,
                           "inputs are on different devices (" + device.name() + " and " +
                               t.device().name() + "); move them with .to(device)"));
  Backend& backend = device.backend();
  for (const TensorType& t : in_types)
    if (!backend.supports(kind, t.dtype))
      throw Error(op_error(kind, in_types, where,
                           "not supported on device " + device.name() + " (" + backend.name() +
                               ") for dtype " + std::string(dtype_name(t.dtype))));

  std::vector<Tensor> outputs;
  // A reshape of contiguous memory is the same bytes: share them instead of copying.
  if (kind == OpKind::Reshape) {
    auto impl = std::make_shared<TensorImpl>(inputs[0].impl());
    impl->type = out_types[0];
    impl->requires_grad = false;  // the view's own history is recorded by record_for_autograd
    impl->grad_fn = nullptr;
    impl->grad = nullptr;
    outputs.emplace_back(std::move(impl));
    return outputs;
  }

  std::vector<BufferView> in_views, out_views;
  for (size_t i = 0; i < inputs.size(); ++i)
    in_views.push_back({inputs[i].impl().buffer.get(), in_types[i].dtype,
                        static_dims(in_types[i].shape)});
  for (const TensorType& t : out_types) {
    auto impl = std::make_shared<TensorImpl>();
    impl->type = t;
    impl->device = device;
    size_t bytes = size_t(numel(t.shape).value()) * dtype_size(t.dtype);
    impl->buffer = backend.alloc(bytes);
    out_views.push_back({impl->buffer.get(), t.dtype, static_dims(t.shape)});
    outputs.emplace_back(std::move(impl));
  }
  try {
    backend.execute(OpRun{kind, attrs, in_views, out_views});
  } catch (const Error& e) {
    throw Error(op_error(kind, in_types, where, e.what()));
  }
  return outputs;
}

}  // namespace

Provenance provenance_at(const Loc& loc) { return Provenance::from(loc, current_scope()); }

std::vector<Tensor> run_op(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                           const Loc& loc) {
  return run_op_at(kind, inputs, attrs, provenance_at(loc));
}

std::vector<Tensor> run_op_at(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                              const Provenance& where) {
  std::vector<TensorType> in_types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(op_error(kind, in_types, where,
                           "input " + std::to_string(i) + " is an undefined (empty) Tensor"));
    in_types.push_back(inputs[i].type());
  }
  if (Tracer* tracer = tracer_of(inputs)) return tracer->record(kind, inputs, attrs, where);
  if (!inputs.empty())  // inside a compiled function with graph breaks: record, run at a flush
    if (Tracer* lazy = lazy_tracer()) {
      // Except an op autograd must record: the segment so far runs, then this op runs eagerly.
      bool differentiable = false;
      for (const Tensor& t : inputs) differentiable = differentiable || t.impl().requires_grad;
      if (!differentiable || !grad_mode_enabled()) return lazy->record(kind, inputs, attrs, where);
      flush_lazy();
    }
  AttrMap full;  // attributes with defaults, completed once for the rule and the backend
  std::vector<TensorType> out_types = infer_types(kind, in_types, attrs, where, &full);
  auto eager = [&] { return run_eager(kind, inputs, full, in_types, out_types, where); };
  std::vector<Tensor> outputs =  // checked mode (core/runtime/checked.h): NaN/Inf, index range
      checked_mode() ? run_checked(kind, inputs, attrs, where, eager) : eager();
  record_for_autograd(kind, full, where, inputs, outputs);
  if (t_observer) t_observer(kind, where, outputs);
  return outputs;
}

void set_op_observer(OpObserver observer) { t_observer = std::move(observer); }

Tensor run_op1(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
               const Loc& loc) {
  return run_op(kind, inputs, attrs, loc).at(0);
}

Tensor scalar_operand(double value, const Tensor& like, const Loc& loc) {
  DType dtype = like.dtype();
  bool fractional = value != std::floor(value) || !std::isfinite(value);
  if (!is_floating(dtype) && (fractional || dtype == DType::Bool)) dtype = DType::F32;
  if (dtype == DType::Bool && !fractional) dtype = DType::I64;
  auto lit = std::make_shared<Literal>();
  lit->dtype = dtype;
  lit->bytes.resize(dtype_size(dtype));
  convert_elements(&value, DType::F64, lit->bytes.data(), dtype, 1);
  if (like.is_traced()) {
    Tracer& tracer = *like.impl().tracer;
    return tracer.record(OpKind::Constant, {}, {{"value", std::shared_ptr<const Literal>(lit)}},
                         provenance_at(loc))[0];
  }
  Device device = like.device();
  auto impl = std::make_shared<TensorImpl>();
  impl->type = {dtype, {}};
  impl->device = device;
  impl->buffer = device.backend().alloc(lit->bytes.size());
  device.backend().upload(*impl->buffer, lit->bytes.data(), lit->bytes.size());
  return Tensor(std::move(impl));
}

}  // namespace kiln
