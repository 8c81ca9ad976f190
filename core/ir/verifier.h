// The verifier: checks a graph's structure and types; returns every problem found.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln {

std::vector<std::string> verify_graph(const Graph& graph);
// Throws kiln::Error listing every problem when the graph is not valid.
void verify_graph_or_throw(const Graph& graph);

}  // namespace kiln
