// A compiled while_loop whose predicate stays on the device, for backends whose launches can read
// their group counts from a buffer (DeviceCaps::indirect_launch: Vulkan's vkCmdDispatchIndirect).
//
// Each iteration queues the cond program's launches, then a gate kernel that reads the predicate
// and writes the group counts of that iteration's body launches and of the next iteration's cond
// launches: the program's own counts while every predicate so far was true, else zeros, so the
// launches after the loop's end run no workgroups. The host queues iterations in batches, waits
// once per batch, and reads the batch's flags to find the iteration where the loop stopped; that
// iteration's state is the result. The first batch holds the last run's trip count plus one (so a
// loop that runs as often as before waits once), and each next batch twice as many, up to
// kMaxBatch: a first run of n iterations waits about log2(n) + n / kMaxBatch times, where the
// host loop waits n + 1 times.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/runtime/device_tensor.h"
#include "core/runtime/kernel_programs.h"
#include "core/runtime/planned_program.h"

namespace kiln {

class DeviceLoop {
 public:
  static constexpr int kMaxBatch = 64;
  // At most this many bytes of carried state are queued at once (a batch keeps each iteration's).
  static constexpr size_t kMaxQueuedStateBytes = size_t(256) << 20;

  // Whether a loop over these compiled programs can run this way on `device` now (checked mode
  // runs every kernel alone, so it keeps the host loop; KILN_DEVICE_LOOPS=0 keeps it too).
  static bool available(Device device, const DeviceProgram& cond, const DeviceProgram& body);
  DeviceLoop(Device device, PlannedProgram& cond, PlannedProgram& body, size_t carried);

  // The carried values after the loop (operands: carried values first, then captured ones).
  std::vector<DeviceTensor> run(const std::vector<DeviceTensor>& operands);
  // Times the host waited for the device and read predicates, over every run.
  int64_t host_waits() const { return host_waits_; }

 private:
  // The gate kernel for `entries` i32 values: out[k] = table[k] if prev[0] != 0 and pred[0], else 0.
  const CompiledKernel& gate_kernel(int64_t entries, std::array<uint32_t, 3>& groups);
  // Uploads [1, the body's group counts, the cond's group counts] when they changed (the host has
  // waited for every gate that read the last table), and makes the gate kernel for its size.
  void use_table(const std::vector<Launch>& body, const std::vector<Launch>& cond);
  // Queues one iteration on `state` (carried values, then the operands' captured ones): its cond,
  // gated by `previous_gate` (none for a batch's first), its gate and its body. Returns the gate it
  // writes and the state after it, valid where that gate's flag comes out set.
  struct Iteration {
    std::unique_ptr<Buffer> gate;
    std::vector<DeviceTensor> state;
  };
  Iteration queue_iteration(const std::vector<DeviceTensor>& state, const std::vector<DeviceTensor>& operands,
                            Buffer* previous_gate);

  Backend& backend_;
  PlannedProgram& cond_;
  PlannedProgram& body_;
  size_t carried_;
  KernelPrograms gate_programs_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Buffer> ones_;   // one i32 1: the "previous" flag of a batch's first gate
  std::unique_ptr<Buffer> table_;  // the group counts the gates copy or zero
  std::vector<int32_t> table_values_;
  const CompiledKernel* gate_ = nullptr;
  std::array<uint32_t, 3> gate_groups_{1, 1, 1};
  std::vector<uint8_t> gate_params_;
  int64_t host_waits_ = 0;
  int64_t last_iterations_ = 0;  // the last run's trip count
};

}  // namespace kiln
