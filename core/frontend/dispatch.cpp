// run_op: validation, then eager execution on the device or recording into the trace.
#include "core/frontend/dispatch.h"

#include <cmath>

#include "core/frontend/autograd.h"
#include "core/frontend/lazy.h"
#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"
#include "core/runtime/execute_op.h"

namespace kiln {
namespace {

thread_local OpObserver t_observer;

Tracer* tracer_of(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.is_traced()) return t.impl().tracer;
  return nullptr;
}

}  // namespace

Provenance provenance_at(const Loc& loc) { return Provenance::from(loc, current_scope()); }

std::vector<Tensor> run_op(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                           const Loc& loc) {
  return run_op_at(kind, inputs, attrs, provenance_at(loc));
}

std::vector<Tensor> run_op_at(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                              const Provenance& where) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) {
      std::vector<TensorType> before;
      for (size_t j = 0; j < i; ++j) before.push_back(inputs[j].type());
      throw Error(op_error(kind, before, where,
                           "input " + std::to_string(i) + " is an undefined (empty) Tensor"));
    }
  // Inside a compiled function every op is traced, eager operands captured: an op on parameters
  // or optimizer state alone must read their values at each call, not once at trace time. Inside
  // a while_loop's subgraph (captures_traced) that holds for the enclosing trace's values too.
  Tracer* compiling = inputs.empty() ? nullptr : compiling_tracer();
  if (compiling && compiling->captures_traced) return compiling->record(kind, inputs, attrs, where);
  if (Tracer* tracer = tracer_of(inputs)) return tracer->record(kind, inputs, attrs, where);
  if (compiling) return compiling->record(kind, inputs, attrs, where);
  if (!inputs.empty())  // inside a compiled function with graph breaks: record, run at a flush
    if (Tracer* lazy = lazy_tracer()) {
      // Except an op autograd must record: the segment so far runs, then this op runs eagerly.
      bool differentiable = false;
      for (const Tensor& t : inputs) differentiable = differentiable || t.impl().requires_grad;
      if (!differentiable || !grad_mode_enabled()) return lazy->record(kind, inputs, attrs, where);
      flush_lazy();
    }
  AttrMap full;  // attributes with defaults, for autograd's rule
  std::vector<Tensor> outputs = tensors_of(execute_op(kind, device_tensors(inputs), attrs, where, &full));
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
  return tensor_of(DeviceTensor::upload({dtype, {}}, lit->bytes.data(), like.device()));
}

}  // namespace kiln
