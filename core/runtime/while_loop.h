// A while_loop node at run time (the op: core/ir/ops/control.cpp). Eagerly and on the interpreter
// the host runs the loop: each iteration runs the cond subgraph node by node, reads its one bool,
// and runs the body while it is true. In a compiled program (segmented_program.h) each subgraph is
// a program of its own, compiled once with fusion; where the device's launches can take their
// sizes from a buffer (Vulkan), the predicate stays on the device and the host waits once per
// batch of iterations (device_loop.h), elsewhere once per iteration.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/provenance.h"
#include "core/runtime/device_loop.h"
#include "core/runtime/device_tensor.h"
#include "core/runtime/program.h"

namespace kiln {

// One run of a subgraph on the loop's operands (carried values first, then captured ones).
using SubgraphRun = std::function<std::vector<DeviceTensor>(const std::vector<DeviceTensor>&)>;

// The loop itself: while run_cond(operands) is true, the carried operands become run_body's
// results. Returns the carried values.
std::vector<DeviceTensor> run_loop(const std::vector<DeviceTensor>& operands, size_t carried,
                                   const SubgraphRun& run_cond, const SubgraphRun& run_body,
                                   const Provenance& where);

// A while_loop node run now (execute_op's path): its subgraphs interpreted on the operands' device.
std::vector<DeviceTensor> interpret_while_loop(const std::vector<DeviceTensor>& operands,
                                               const AttrMap& attrs, const Provenance& where);

// A while_loop node of a compiled program: its cond and body compiled for `device` (the graph
// passes, fusion and every later stage, as compile_graph does for any graph).
class CompiledWhileLoop {
 public:
  // `dump_dir`, when not empty, receives each subgraph's stage dumps in cond/ and body/.
  CompiledWhileLoop(const AttrMap& attrs, const Provenance& where, Device device,
                    const ProgramOptions& options, const std::string& dump_dir);
  std::vector<DeviceTensor> run(const std::vector<DeviceTensor>& operands);
  // Launches of one iteration (the cond's and the body's kernels).
  int64_t kernels_per_iteration() const;
  void release_intermediates();
  // Times the host waited for a predicate, over every run: once per iteration on the host loop,
  // once per batch of iterations on the device loop.
  int64_t host_waits() const;

 private:
  Device device_;
  size_t carried_;
  Provenance where_;
  std::unique_ptr<DeviceProgram> cond_, body_;
  std::unique_ptr<DeviceLoop> device_loop_;  // made at the first run that can use it
  int64_t host_loop_waits_ = 0;
};

}  // namespace kiln
