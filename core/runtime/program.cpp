// build_program: the interpreter-backed program (fusion and memory planning replace it on
// code-generating backends as they land).
#include "core/runtime/program.h"

#include "core/runtime/interpreter.h"

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

std::unique_ptr<DeviceProgram> build_program(const Graph& graph, Device, const ProgramOptions&) {
  return std::make_unique<InterpretedProgram>(graph);
}

}  // namespace kiln
