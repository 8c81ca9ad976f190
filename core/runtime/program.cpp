// build_program: the planned program (fused kernels, memory plan, optional recording) on backends
// that generate code, the node-by-node interpreter on the cpu reference and the null backend.
#include "core/runtime/program.h"

#include "core/runtime/interpreter.h"
#include "core/runtime/planned_program.h"

namespace kiln {

namespace {

class InterpretedProgram : public DeviceProgram {
 public:
  explicit InterpretedProgram(const Graph& graph) : graph_(graph.clone()) {
    stats_.kernels = stats_.nodes = int64_t(graph_.num_nodes());
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override { return interpret(graph_, inputs); }
  const ProgramStats& stats() const override { return stats_; }

 private:
  Graph graph_;
  ProgramStats stats_;
};

}  // namespace

std::unique_ptr<DeviceProgram> build_program(const Graph& graph, Device device, const ProgramOptions& options) {
  if (device.kind() == BackendKind::Vulkan || device.kind() == BackendKind::Cuda)
    return std::make_unique<PlannedProgram>(graph, device, options);
  return std::make_unique<InterpretedProgram>(graph);
}

}  // namespace kiln
