// assign_in_place: a buffer swap, a traced write, or a flush and then a swap.
#include "core/frontend/in_place.h"

#include "core/frontend/lazy.h"
#include "core/frontend/tracer.h"

namespace kiln {

void assign_in_place(Tensor& target, const Tensor& value) {
  if (value.is_traced() && value.impl().tracer->lazy) flush_lazy();  // lazy mode: run it first
  TensorImpl& impl = target.impl();
  if (value.dtype() != impl.type.dtype || value.device() != impl.device ||
      (!value.is_traced() && value.type().str() != impl.type.str()))
    throw Error("in-place update: a " + impl.type.str() + " tensor on " + impl.device.name() +
                " cannot take a " + value.type().str() + " value on " + value.device().name());
  if (value.is_traced()) {
    value.impl().tracer->write(target, value);
    return;
  }
  impl.buffer = value.impl().buffer;
}

}  // namespace kiln
