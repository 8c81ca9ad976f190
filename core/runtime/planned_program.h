// PlannedProgram: the executor of a LoweredProgram on a code-generating backend (Vulkan, CUDA).
// compile_graph's stages hand it the program's plain data, its compiled kernels and the memory plan
// for the traced sizes. Per set of input shapes it plans memory again, allocates arenas and packs
// push constants (and records the launches with reduce_overhead); per run it binds buffers and
// launches, or replays the recording. Its debugging paths (profiled runs, one kernel alone, checked
// mode) are in planned_checks.cpp.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/runtime/kernel_programs.h"
#include "core/runtime/lowered_program.h"
#include "core/runtime/memory_plan.h"
#include "core/runtime/program.h"
#include "core/runtime/program_memory.h"
#include "core/support/error.h"

namespace kiln {

struct ProgramStages;  // compile_graph.h

// One launch for the latest input shapes: the code that ran, for debug bundles and profiles.
struct PlannedLaunch {
  int kernel = -1;  // index into kernels()
  std::string name;
  std::string language;  // "glsl", "cuda"
  std::string source;
  std::vector<std::vector<int>> line_origins;  // per 0-based line: node ids; empty for a template
  std::array<uint32_t, 3> groups{1, 1, 1};
  int workgroup_size = 0;  // 0: set by the template's own source
  bool is_template = false;  // the backend's tuned kernel replaced the generated one
};

// One kernel launch timed by the device; start_us is its start on the device's clock counted from
// the run's first launch (where the backend records starts; else the durations before it added
// up), so gaps between launches show.
struct LaunchTiming {
  int launch = 0;  // index into launches()
  int kernel = -1;
  double start_us = 0, time_us = 0;
};

class PlannedProgram : public DeviceProgram {
 public:
  // Runs fusion, lowering, emission, the backend compile and memory planning on `graph`
  // (compile_graph's stages after the graph passes).
  PlannedProgram(const Graph& graph, Device device, const ProgramOptions& options = {});
  PlannedProgram(ProgramStages stages, Device device, const ProgramOptions& options = {});
  ~PlannedProgram() override;

  // A lost device (DeviceLostError) is reported with the kernel that was running and its ops' lines.
  std::vector<DeviceTensor> run(const std::vector<DeviceTensor>& inputs) override;
  const ProgramStats& stats() const override { return stats_; }
  void release_intermediates() override;

  const std::vector<PlannedKernel>& kernels() const { return kernels_; }
  // Constant nodes: uploaded once when the program is built, computed by no kernel.
  const std::vector<int>& constant_nodes() const { return constant_nodes_; }
  // The plan for the latest input shapes (the traced shapes before the first run), and the values
  // it placed: intermediates and kernel scratch, never graph inputs, outputs or constants.
  const MemoryPlan& memory_plan() const { return plan_; }
  const std::vector<PlanValue>& plan_values() const { return plan_values_; }
  // Times the launches were recorded (reduce_overhead): once per distinct set of input shapes seen.
  int recordings() const { return recordings_; }
  // Launches skipped because their kernel is kept (kept_kernels.h) and read the same buffers last run.
  int64_t kept_launches() const { return kept_launches_; }
  // Per plan_values() entry: the graph value id it holds, -1 for kernel scratch.
  const std::vector<int>& plan_value_ids() const { return plan_value_ids_; }
  Device device() const { return device_; }

  // The launches for the latest input shapes (none before the first run), in order.
  std::vector<PlannedLaunch> launches() const;
  // One run (launched directly, not replayed) that also times every kernel launch on the device.
  // `timings` is left empty when the device records no timestamps.
  std::vector<DeviceTensor> run_profiled(const std::vector<DeviceTensor>& inputs,
                                         std::vector<LaunchTiming>& timings);
  // Runs kernel `k` alone, reading `inputs` (graph value id -> tensor, any device; every id in
  // kernels()[k].reads) instead of the program's buffers, at the latest input shapes (run() first).
  // Returns kernels()[k].writes' values, on the program's device. For per-kernel accuracy checks.
  std::map<int, DeviceTensor> run_kernel(size_t k, const std::map<int, DeviceTensor>& inputs);

  // A run whose launches the caller queues, on a stream of its own (device_loop.h): the results,
  // allocated now, and the launches that compute them in order, none issued yet. The program's
  // intermediates stay in its arenas, so runs queued one after another on one stream may share
  // them. Not with reduce_overhead, checked mode or donated inputs.
  struct QueuedRun {
    std::vector<DeviceTensor> results;
    std::vector<Launch> launches;
  };
  QueuedRun queue_run(const std::vector<DeviceTensor>& inputs);

 private:
  struct LaunchPlan {  // one launch for the current shapes
    const CompiledKernel* program;
    std::vector<int> args;
    std::vector<uint8_t> push_constants;
    std::array<uint32_t, 3> groups;
    int kernel = -1;  // schedule_ index; -1 for input/output copies
    int step = -1;    // index into its ProgramKernel::steps; -1 for a template
  };
  struct Binding {
    Buffer* buffer;
    size_t offset;
  };

  std::vector<DeviceTensor> launch_run(const std::vector<DeviceTensor>& inputs);
  // DeviceLostError's message with the kernel that launched last and its ops' source lines
  // (planned_checks.cpp).
  std::string lost_kernel_text(const DeviceLostError& lost) const;
  const CompiledKernel& program_for(const ProgramStep& step);
  std::optional<LaunchPlan> template_launch(const ProgramKernel& ks,
                                            const std::map<std::string, int64_t>& bindings);
  std::map<std::string, int64_t> bind(const std::vector<DeviceTensor>& inputs) const;
  void plan_for(const std::map<std::string, int64_t>& bindings);
  void use_plan(ProgramMemory memory);
  void prepare(const std::map<std::string, int64_t>& bindings);
  LaunchPlan copy_launch(DType dtype, int64_t elements);
  size_t bytes_of(int value) const;
  // The buffer of the donated input that graph output `output` may be written over, or null.
  std::shared_ptr<Buffer> donated_buffer(size_t output, const std::vector<DeviceTensor>& inputs) const;
  // reduce_overhead: binds donated inputs directly (no copy in, their outputs written over them, no
  // copy out), recording again when the set of such buffers changes.
  void bind_direct(const std::vector<DeviceTensor>& inputs);
  Buffer* direct_buffer(size_t input) const;  // input's directly bound buffer, or null
  // reduce_overhead: whether graph output `output` is lent (ProgramOptions::lent_outputs), and its
  // buffer for this run: the one the caller had, when the caller has let it go.
  bool is_lent(size_t output) const;
  std::shared_ptr<Buffer> lend_output(size_t output);
  Binding resolve(int value, const std::vector<DeviceTensor>& inputs,
                  const std::vector<std::shared_ptr<Buffer>>& outputs) const;
  void launch(const LaunchPlan& plan, const std::vector<Binding>& bindings);
  // Per schedule kernel: whether it is kept and read the same buffers (by serial) last run, so its
  // results are still in place; remembers this run's serials.
  std::vector<bool> kept_from_last_run(const std::vector<DeviceTensor>& inputs,
                                       const std::vector<std::shared_ptr<Buffer>>& outputs);
  // Checked mode (planned_checks.cpp): runs launches_ kernel by kernel, scanning each kernel's
  // outputs and, for indexing kernels, its indices first.
  void run_kernels_checked(const std::function<std::vector<Binding>(const std::vector<int>&)>& bind_args);
  std::vector<int64_t> dims_of(const Shape& shape) const;  // at bindings_
  std::map<int, DeviceTensor> read_values(const std::vector<int>& value_numbers,
                                          const std::function<Binding(int)>& where) const;

  Device device_;
  Backend& backend_;
  kernel::CodegenTarget target_;
  ProgramOptions options_;
  ProgramStats stats_;
  std::vector<TensorType> input_types_;
  std::vector<int> output_values_;  // value number per graph output
  std::vector<ProgramValue> values_;
  std::vector<ProgramKernel> schedule_;
  std::vector<PlannedKernel> kernels_;
  std::vector<int> constant_nodes_;
  std::vector<std::unique_ptr<Buffer>> constants_;
  KernelPrograms programs_;
  std::vector<std::vector<const CompiledKernel*>> step_programs_;  // per kernel, per step
  bool profiling_ = false;  // run(): launch directly even with reduce_overhead
  std::vector<Launch>* queued_ = nullptr;  // queue_run(): launches collected here, not issued
  Launch launch_scratch_;                  // launch(): refilled for each launch

  // For the current input shapes.
  bool prepared_ = false;
  std::map<std::string, int64_t> bindings_;
  std::vector<PlanValue> plan_values_;
  std::vector<int> plan_value_ids_;
  std::vector<int> plan_index_;  // per value number: its planned value, -1 if unplanned
  MemoryPlan plan_;
  std::vector<std::unique_ptr<Buffer>> arenas_;
  std::vector<LaunchPlan> launches_;
  std::vector<OutputOverInput> outputs_over_inputs_;  // safe where the caller donates the input
  std::vector<LaunchPlan> output_copies_;  // per graph output: copy into the returned buffer (or none)
  std::vector<LaunchPlan> input_copies_;   // reduce_overhead: per graph input
  std::vector<std::unique_ptr<Buffer>> owned_inputs_;   // reduce_overhead
  std::vector<std::shared_ptr<Buffer>> owned_outputs_;  // reduce_overhead; lent ones shared with the caller
  std::vector<std::shared_ptr<Buffer>> copied_inputs_;  // the buffer each owned input holds a copy of
  // reduce_overhead: per input, the caller's buffer the recording binds directly (a donated input).
  // Weak: holding it would keep its tensor from donating it again; an expired one records again.
  struct DirectInput {
    std::weak_ptr<Buffer> buffer;
    bool bound = false;
  };
  std::vector<DirectInput> direct_;
  bool recorded_ = false;
  int recordings_ = 0;
  std::vector<std::vector<uint64_t>> kept_serials_;  // per schedule kernel: its reads' serials last run
  int64_t kept_launches_ = 0;
  std::unique_ptr<Stream> stream_;
};

}  // namespace kiln
