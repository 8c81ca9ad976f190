// execute_op: one op run now on its inputs' device. Every eager op, every node the interpreter
// runs, every kernel replay and constant fold comes here: the op's shape rule checks the call, the
// device must hold every input and support the op, outputs are allocated, the backend runs it, and
// checked mode (checked.h) scans around it.
#pragma once

#include <vector>

#include "core/ir/attr.h"
#include "core/ir/op.h"
#include "core/ir/provenance.h"
#include "core/runtime/device_tensor.h"

namespace kiln {

// Ops without inputs (constants, factories) run on `Device::cpu()`. `completed`, when given,
// receives `attrs` with their defaults filled in. Errors name the op, its operand types and `where`.
std::vector<DeviceTensor> execute_op(OpKind kind, const std::vector<DeviceTensor>& inputs,
                                     const AttrMap& attrs, const Provenance& where,
                                     AttrMap* completed = nullptr);

}  // namespace kiln
