// execute_op: the checks, allocation and backend call for one op run now.
#include "core/runtime/execute_op.h"

#include "core/runtime/checked.h"
#include "core/runtime/eager_programs.h"
#include "core/runtime/while_loop.h"
#include "core/support/error.h"

namespace kiln {
namespace {

std::vector<DeviceTensor> run_on_device(OpKind kind, const std::vector<DeviceTensor>& inputs,
                                        const AttrMap& attrs, const std::vector<TensorType>& in_types,
                                        const std::vector<TensorType>& out_types,
                                        const Provenance& where) {
  Device device = inputs.empty() ? Device::cpu() : inputs[0].device;
  for (const DeviceTensor& t : inputs)
    if (t.device != device)
      throw Error(op_error(kind, in_types, where,
                           "inputs are on different devices (" + device.name() + " and " +
                               t.device.name() + "); move them with .to(device)"));
  Backend& backend = device.backend();
  for (const TensorType& t : in_types)
    if (!backend.supports(kind, t.dtype))
      throw Error(op_error(kind, in_types, where,
                           "not supported on device " + device.name() + " (" + backend.name() +
                               ") for dtype " + std::string(dtype_name(t.dtype))));

  // A reshape of contiguous memory is the same bytes: share them instead of copying.
  if (kind == OpKind::Reshape) return {DeviceTensor{out_types[0], device, inputs[0].buffer}};

  std::vector<DeviceTensor> outputs;
  std::vector<BufferView> in_views, out_views;
  for (size_t i = 0; i < inputs.size(); ++i)
    in_views.push_back({inputs[i].buffer.get(), in_types[i].dtype, static_dims(in_types[i].shape), true});
  try {  // out of device memory for an output names the op too
    for (const TensorType& t : out_types) {
      outputs.push_back(DeviceTensor::allocate(t, device));
      out_views.push_back({outputs.back().buffer.get(), t.dtype, static_dims(t.shape)});
    }
    run_on_backend(backend, OpRun{kind, attrs, in_views, out_views});
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(op_error(kind, in_types, where, e.what()));
  } catch (const DeviceLostError& e) {
    throw DeviceLostError(op_error(kind, in_types, where, e.what()), e.last_launch());
  } catch (const Error& e) {
    throw Error(op_error(kind, in_types, where, e.what()));
  }
  return outputs;
}

}  // namespace

std::vector<DeviceTensor> execute_op(OpKind kind, const std::vector<DeviceTensor>& inputs,
                                     const AttrMap& attrs, const Provenance& where,
                                     AttrMap* completed) {
  std::vector<TensorType> in_types;
  in_types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(op_error(kind, in_types, where,
                           "input " + std::to_string(i) + " is an undefined (empty) Tensor"));
    in_types.push_back(inputs[i].type);
  }
  AttrMap full;  // attributes with defaults, completed once for the rule and the backend
  std::vector<TensorType> out_types = infer_types(kind, in_types, attrs, where, &full);
  if (kind == OpKind::WhileLoop) {  // control flow runs its subgraphs' ops, each checked on its own
    std::vector<DeviceTensor> outputs = interpret_while_loop(inputs, full, where);
    if (completed) *completed = std::move(full);
    return outputs;
  }
  auto run = [&] { return run_on_device(kind, inputs, full, in_types, out_types, where); };
  std::vector<DeviceTensor> outputs =
      checked_mode() ? run_checked(kind, inputs, attrs, where, run) : run();
  if (completed) *completed = std::move(full);
  return outputs;
}

}  // namespace kiln
