// DeviceProgram: a graph made ready to run on one device: its kernels (fused where the device
// generates code), a memory plan for intermediates, and run() which replays them. compile() builds
// one per guard set; compile_graph (compile_graph.h) builds it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/runtime/device_tensor.h"
#include "core/runtime/donation.h"

namespace kiln {

struct ProgramStats {
  int64_t kernels = 0;            // launches per run
  int64_t nodes = 0;              // graph nodes covered
  int64_t naive_bytes = 0;        // every intermediate in its own buffer
  int64_t lower_bound_bytes = 0;  // peak bytes live at once, for this kernel order
  int64_t planned_bytes = 0;      // the arena the memory plan uses
};

struct ProgramOptions {
  bool fuse = true;              // group nodes into kernels where the backend generates code
  bool reduce_overhead = false;  // record the launches once and replay them
  bool max_autotune = false;     // templates time their variants for this program's ops
  // Outputs that replace inputs' values (a training step's updated parameters and optimizer
  // state): the program writes each over its input's buffer where that is safe (donation.h) and
  // the caller donates the buffer for the run (DeviceTensor::donated). With reduce_overhead the
  // recording binds such buffers directly instead of copying them in and out, while they come back.
  std::vector<OutputOverInput> outputs_over_inputs;
  // reduce_overhead: outputs whose recorded buffer is handed to the caller instead of copied out (a
  // training step's gradients, which the next step drops). The next run takes the buffer back when
  // the caller has let it go, and records again with a new one when it has not.
  std::vector<size_t> lent_outputs;
  // Inputs that are parameters (an imported model's weights, a compiled function's captures), not
  // data: kernels that read only these and constants are kept between runs while the same
  // buffers come back (kept_kernels.h).
  std::vector<size_t> parameter_inputs;
};

class DeviceProgram {
 public:
  virtual ~DeviceProgram() = default;
  // Inputs bind graph.inputs() in order; symbols in dynamic dims resolve from their shapes.
  virtual std::vector<DeviceTensor> run(const std::vector<DeviceTensor>& inputs) = 0;
  virtual const ProgramStats& stats() const = 0;
  // Frees what the program keeps between runs for its intermediates (its arenas) where it can
  // allocate them again on the next run at the cost of planning that run again. A program that
  // replays recorded launches (reduce_overhead) keeps them.
  virtual void release_intermediates() {}
};

// The program for `device` from an already optimized graph: compile_graph's stages after the graph
// passes (fused kernels and a planned arena on code-generating backends; the node-by-node
// interpreter elsewhere). Defined in compile_graph.cpp.
// `dump_dir`, when not empty, receives the stages' dumps.
std::unique_ptr<DeviceProgram> build_program(const Graph& graph, Device device,
                                             const ProgramOptions& options = {},
                                             const std::string& dump_dir = "");
// The graph run node by node through the device's execute().
std::unique_ptr<DeviceProgram> make_interpreted_program(const Graph& graph);

}  // namespace kiln
