// PlannedProgram: the DeviceProgram for code-generating backends (Vulkan, CUDA). The graph is fused
// into kernels (core/passes/fusion.h), each compiled once; intermediates live in arenas placed by the
// memory plan; run() launches the kernels on one stream with sizes as push constants. With
// reduce_overhead the launches are recorded once per set of input shapes and replayed, inputs and
// outputs going through the program's own buffers.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/kernel/lower.h"
#include "core/runtime/memory_plan.h"
#include "core/runtime/program.h"

namespace kiln {

struct PlannedKernel {
  std::string name;
  std::vector<int> origins;          // graph node ids its expressions compute (from the kernel IR)
  std::vector<std::string> sources;  // generated code, one per launch
};

class PlannedProgram : public DeviceProgram {
 public:
  PlannedProgram(const Graph& graph, Device device, const ProgramOptions& options = {});
  ~PlannedProgram() override;

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) override;
  const ProgramStats& stats() const override { return stats_; }

  const std::vector<PlannedKernel>& kernels() const { return kernels_; }
  // Constant nodes: uploaded once when the program is built, computed by no kernel.
  const std::vector<int>& constant_nodes() const { return constant_nodes_; }
  // The plan for the latest input shapes (the traced shapes before the first run), and the values
  // it placed: intermediates and kernel scratch, never graph inputs, outputs or constants.
  const MemoryPlan& memory_plan() const { return plan_; }
  const std::vector<PlanValue>& plan_values() const { return plan_values_; }
  // Times the launches were recorded (reduce_overhead): once per distinct set of input shapes seen.
  int recordings() const { return recordings_; }

 private:
  enum class Storage { Input, Constant, Arena, Output };
  struct ValueInfo {
    TensorType type;
    Storage storage = Storage::Arena;
    int index = -1;  // graph input / constant / plan value / graph output number
    std::string name;
  };
  struct Step {
    kernel::LoweredKernel kernel;
    const Program* program = nullptr;
    std::vector<int> args;  // value numbers bound to the kernel's slots
  };
  struct KernelSteps {
    std::vector<Step> steps;
    // A group that is one matmul/linear/gemm node: the backend may run a tuned template for it.
    const Node* single_linalg = nullptr;
    std::vector<int> node_inputs, node_outputs;  // its operands' value numbers, in op order
    std::vector<int> reads, writes;  // value numbers
    int in_place_output = -1, in_place_input = -1;
  };
  struct LaunchPlan {  // one launch for the current shapes
    const Program* program;
    std::vector<int> args;
    std::vector<uint8_t> push_constants;
    std::array<uint32_t, 3> groups;
  };
  struct Binding {
    Buffer* buffer;
    size_t offset;
  };

  const Program& program_for(const kernel::LoweredKernel& k, std::string* source = nullptr);
  std::optional<LaunchPlan> template_launch(const KernelSteps& ks,
                                            const std::map<std::string, int64_t>& bindings);
  std::map<std::string, int64_t> bind(const std::vector<Tensor>& inputs) const;
  void plan_for(const std::map<std::string, int64_t>& bindings);
  void prepare(const std::map<std::string, int64_t>& bindings);
  LaunchPlan copy_launch(DType dtype, int64_t elements);
  size_t bytes_of(int value) const;
  Binding resolve(int value, const std::vector<Tensor>& inputs, const std::vector<std::shared_ptr<Buffer>>& outputs) const;
  void launch(const LaunchPlan& plan, const std::vector<Binding>& bindings);

  Device device_;
  Backend& backend_;
  ProgramOptions options_;
  ProgramStats stats_;
  std::vector<TensorType> input_types_;
  std::vector<int> output_values_;  // value number per graph output
  std::vector<ValueInfo> values_;
  std::vector<KernelSteps> schedule_;
  std::vector<PlannedKernel> kernels_;
  std::vector<int> constant_nodes_;
  std::vector<std::unique_ptr<Buffer>> constants_;
  std::map<std::string, std::unique_ptr<Program>> programs_;  // by source text

  // For the current input shapes.
  bool prepared_ = false;
  std::map<std::string, int64_t> bindings_;
  std::vector<PlanValue> plan_values_;
  MemoryPlan plan_;
  std::vector<std::unique_ptr<Buffer>> arenas_;
  std::vector<LaunchPlan> launches_;
  std::vector<LaunchPlan> output_copies_;  // per graph output: copy into the returned buffer (or none)
  std::vector<LaunchPlan> input_copies_;   // reduce_overhead: per graph input
  std::vector<std::unique_ptr<Buffer>> owned_inputs_, owned_outputs_;  // reduce_overhead
  std::vector<std::shared_ptr<Buffer>> copied_inputs_;  // the buffer each owned input holds a copy of
  bool recorded_ = false;
  int recordings_ = 0;
  std::unique_ptr<Stream> stream_;
};

}  // namespace kiln
