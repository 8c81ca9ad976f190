// A program for a graph with control flow (while_loop nodes) on a code-generating backend. The
// nodes between control-flow nodes form segments, each compiled by the usual stages into a program
// of its own; each loop node runs its compiled cond and body (while_loop.h). Fusion therefore stops
// at a loop's boundary, as it does in torch.compile's higher-order ops. Segments do not donate
// buffers or record launches (ProgramOptions::outputs_over_inputs, reduce_overhead): the caller
// writes updates back from the outputs instead.
#pragma once

#include <memory>
#include <string>

#include "core/ir/graph.h"
#include "core/runtime/program.h"

namespace kiln {

bool has_control_flow(const Graph& graph);

// `dump_dir`, when not empty, receives each segment's and each loop's stage dumps in subfolders.
std::unique_ptr<DeviceProgram> make_segmented_program(const Graph& graph, Device device,
                                                      const ProgramOptions& options,
                                                      const std::string& dump_dir);

}  // namespace kiln
