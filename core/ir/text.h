// The graph IR's text form: print and parse round-trip every op. Documented in docs/ir.md.
#pragma once

#include <string>
#include <string_view>

#include "core/ir/graph.h"

namespace kiln {

// Prints `graph @name(...) { ... }`. Values are renumbered densely (inputs first, then node outputs
// in order), so printing a parsed canonical text gives that text back.
std::string print_graph(const Graph& graph, std::string_view name = "main");
// Throws kiln::Error with line:column on malformed text. Types and attributes are kept as written
// (no shape rule runs), so verify_graph can judge the text. `name`, when given, receives the
// graph's @name.
Graph parse_graph(const std::string& text, std::string* name = nullptr);

// The pieces print_graph writes, for messages and dumps.
std::string print_attr(const Attr& attr);         // 3, 2.0, "s", [1,2], f32, dense<f32[2]>[1.0,2.0]
std::string print_provenance(const Provenance& p);  // loc("a.cpp":3 "f" scope="m"), or "" if none
std::string quote_string(std::string_view s);       // "a\"b" with escapes

}  // namespace kiln
