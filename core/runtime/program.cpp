// The interpreter's program: the graph run node by node on backends that generate no code.
#include "core/runtime/program.h"

#include "core/runtime/interpreter.h"

namespace kiln {

namespace {

class InterpretedProgram : public DeviceProgram {
 public:
  explicit InterpretedProgram(const Graph& graph) : graph_(graph.clone()) {
    stats_.kernels = stats_.nodes = int64_t(graph_.num_nodes());
  }
  std::vector<DeviceTensor> run(const std::vector<DeviceTensor>& inputs) override {
    return interpret(graph_, inputs);
  }
  const ProgramStats& stats() const override { return stats_; }

 private:
  Graph graph_;
  ProgramStats stats_;
};

}  // namespace

std::unique_ptr<DeviceProgram> make_interpreted_program(const Graph& graph) {
  return std::make_unique<InterpretedProgram>(graph);
}

}  // namespace kiln
