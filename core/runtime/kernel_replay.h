// Running a compiled kernel's graph nodes again on the reference (ref): how checked mode finds the op
// inside a fused kernel that made a bad value.
#pragma once

#include <map>
#include <vector>

#include "core/runtime/device_tensor.h"
#include "core/runtime/planned_program.h"
#include "core/runtime/symbol_bindings.h"

namespace kiln {

// Runs `nodes` in order on ref (through execute_op, so checked mode checks each one),
// reading `values` (graph value id -> tensor) and adding every output to it. Throws kiln::Error
// naming the node when one of its inputs is missing.
void replay_on_ref(const std::vector<PlannedNode>& nodes, std::map<int, DeviceTensor>& values,
                   const SymbolBindings& bindings);

}  // namespace kiln
