// Exports of a bundle for other tools: Chrome trace event JSON (opens in Perfetto / chrome://tracing)
// and Graphviz DOT of the final graph with each kernel's nodes as one cluster.
#pragma once

#include <string>

#include "core/trace/bundle.h"

namespace kiln::trace {

// One complete event ("ph":"X", ts/dur in µs) per kernel. Kernels without a recorded start follow
// the previous one; kernels without a time get dur 0 and "timed": false in args.
std::string chrome_trace_json(const Bundle& bundle);
std::string graph_dot(const Bundle& bundle);

// Writes the text to `path`; throws kiln::Error naming it on failure.
void write_file(const std::string& path, const std::string& text);

}  // namespace kiln::trace
