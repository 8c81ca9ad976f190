// Giving an eager tensor new values in place, as optimizers and batch norm's running statistics
// do: every handle to the tensor sees them. kiln never writes into a buffer a tensor already owns;
// the tensor's TensorImpl takes the new values' buffer instead. Inside a compiled function the
// write becomes one of the program's writes-back (applied after each run); in lazy mode the
// recorded segment runs first.
#pragma once

#include "core/frontend/tensor.h"

namespace kiln {

// `value` must have `target`'s dtype and device (and, outside a trace, its shape).
void assign_in_place(Tensor& target, const Tensor& value);

}  // namespace kiln
