// Running a compiled kernel's graph nodes again on the reference (ref): how checked mode finds the op
// inside a fused kernel that made a bad value, and what per-kernel accuracy compares against.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/attr.h"
#include "core/ir/graph.h"
#include "core/runtime/planned_program.h"

namespace kiln {

// Symbols bound from the inputs' sizes, as interpret() binds them.
std::map<std::string, int64_t> bind_symbols(const Graph& graph, const std::vector<Tensor>& inputs);
// `attrs` with symbolic sizes replaced by their values.
AttrMap concrete_attrs(const AttrMap& attrs, const std::map<std::string, int64_t>& bindings);

// Runs `nodes` in order on ref (through run_op_at, so checked mode checks each one),
// reading `values` (graph value id -> tensor) and adding every output to it. Throws kiln::Error
// naming the node when one of its inputs is missing.
void replay_on_ref(const std::vector<PlannedNode>& nodes, std::map<int, Tensor>& values,
                   const std::map<std::string, int64_t>& bindings);

}  // namespace kiln
