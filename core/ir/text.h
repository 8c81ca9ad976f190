// The graph IR's text form: print and parse round-trip every op. Documented in docs/ir.md.
#pragma once

#include <string>

#include "core/ir/graph.h"

namespace kiln {

std::string print_graph(const Graph& graph);
// Throws kiln::Error with line:column on malformed text.
Graph parse_graph(const std::string& text);

}  // namespace kiln
