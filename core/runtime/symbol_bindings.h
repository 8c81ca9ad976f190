// Symbol bindings: the sizes a run gives the symbols of a graph's dynamic dims, and attributes
// with those sizes filled in.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/graph.h"

namespace kiln {

using SymbolBindings = std::map<std::string, int64_t>;

// Checks each input's type against graph.inputs() (count, dtype, rank, static dims) and binds every
// input dim that is a bare symbol to the given size. Throws kiln::Error naming the input, or the
// symbol that two inputs give different sizes.
SymbolBindings bind_graph_inputs(const Graph& graph, const std::vector<TensorType>& inputs);
// `attrs` with symbolic sizes (reshape and expand targets) replaced by their values.
AttrMap concrete_attrs(const AttrMap& attrs, const SymbolBindings& bindings);

}  // namespace kiln
