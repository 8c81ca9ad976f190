// A while_loop on the device: iterations queued in batches, launches gated by the predicate.
#include "core/runtime/device_loop.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/runtime/checked.h"
#include "core/support/env.h"
#include "core/support/error.h"

namespace kiln {

namespace {

// Byte offset of launch `j`'s group counts in a gate's output: the flag, then three u32 per launch.
size_t counts_offset(size_t j) { return 4 + 12 * j; }

void issue(Stream& stream, std::vector<Launch>& launches, Buffer* gate, size_t first_entry) {
  for (size_t j = 0; j < launches.size(); ++j) {
    Launch& l = launches[j];
    if (gate) {
      l.indirect = gate;
      l.indirect_offset = counts_offset(first_entry + j);
    }
    stream.launch(l);
  }
}

size_t state_bytes(const std::vector<DeviceTensor>& state, size_t carried) {
  size_t bytes = 0;
  for (size_t i = 0; i < carried; ++i) bytes += state[i].bytes();
  return bytes;
}

}  // namespace

bool DeviceLoop::available(Device device, const DeviceProgram& cond, const DeviceProgram& body) {
  static const bool off = switched_off("KILN_DEVICE_LOOPS");  // the host loop, for comparisons
  return !off && device.backend().caps().indirect_launch && device.backend().codegen() && !checked_mode() &&
         dynamic_cast<const PlannedProgram*>(&cond) && dynamic_cast<const PlannedProgram*>(&body);
}

DeviceLoop::DeviceLoop(Device device, PlannedProgram& cond, PlannedProgram& body, size_t carried)
    : backend_(device.backend()),
      cond_(cond),
      body_(body),
      carried_(carried),
      gate_programs_(device.backend()) {
  const int32_t one = 1;
  ones_ = backend_.alloc(4);
  backend_.upload(*ones_, &one, 4);
}

const CompiledKernel& DeviceLoop::gate_kernel(int64_t entries, std::array<uint32_t, 3>& groups) {
  using namespace kernel;
  KernelBuilder b("while_loop_gate", KernelKind::Pointwise, {SymInt(entries)});
  const int pred = b.add_buffer(DType::Bool, false);
  const int prev = b.add_buffer(DType::I32, false);
  const int table = b.add_buffer(DType::I32, false);
  const int out = b.add_buffer(DType::I32, true);
  const ExprRef zero = constant(0, DType::I32);
  const ExprRef still_running = op(OpKind::Ne, DType::Bool, {load(prev, DType::I32, zero), zero});
  const ExprRef live = op(OpKind::LogicalAnd, DType::Bool, {still_running, load(pred, DType::Bool, zero)});
  b.kernel().stores.push_back({out, select(live, load(table, DType::I32, linear_index()), zero)});
  ProgramStep step;
  step.kernel = b.finish();
  const CodegenTarget target = *backend_.codegen();
  emit_step(step, emit_options_for(target));
  const CompiledKernel& program = gate_programs_.get(step, language_of(target.dialect));
  groups = gate_programs_.groups(&program, entries);
  gate_params_ = push_constant_bytes(step.kernel.param_values());
  return program;
}

void DeviceLoop::use_table(const std::vector<Launch>& body, const std::vector<Launch>& cond) {
  std::vector<int32_t> values{1};
  for (const std::vector<Launch>* launches : {&body, &cond})
    for (const Launch& l : *launches)
      for (uint32_t g : l.groups) values.push_back(int32_t(g));
  if (values == table_values_) return;
  table_ = backend_.alloc(values.size() * 4);
  backend_.upload(*table_, values.data(), values.size() * 4);
  table_values_ = std::move(values);
  gate_ = &gate_kernel(int64_t(table_values_.size()), gate_groups_);
}

DeviceLoop::Iteration DeviceLoop::queue_iteration(const std::vector<DeviceTensor>& state,
                                                 const std::vector<DeviceTensor>& operands, Buffer* previous_gate) {
  PlannedProgram::QueuedRun cond = cond_.queue_run(state);
  if (cond.results.size() != 1 || cond.results[0].numel() != 1)
    throw Error("internal error: the cond subgraph of a while_loop gave no one-element predicate");
  PlannedProgram::QueuedRun body = body_.queue_run(state);
  if (!previous_gate) use_table(body.launches, cond.launches);  // the host waited: no gate reads it
  if (3 * (body.launches.size() + cond.launches.size()) + 1 != table_values_.size())
    throw Error("internal error: a while_loop iteration planned other launches than its batch's first");
  // The cond reads its counts after the body's in the previous gate; a batch's first cond runs as is.
  issue(*stream_, cond.launches, previous_gate, body.launches.size());
  Iteration out;
  out.gate = backend_.alloc(table_values_.size() * 4);
  Launch g;
  g.program = gate_;
  g.buffers = {cond.results[0].buffer.get(), previous_gate ? previous_gate : ones_.get(), table_.get(),
               out.gate.get()};
  g.push_constants = gate_params_;
  g.groups = gate_groups_;
  stream_->launch(g);
  issue(*stream_, body.launches, out.gate.get(), 0);
  out.state = std::move(body.results);
  out.state.resize(carried_);
  out.state.insert(out.state.end(), operands.begin() + long(carried_), operands.end());
  return out;
}

std::vector<DeviceTensor> DeviceLoop::run(const std::vector<DeviceTensor>& operands) {
  if (!stream_) stream_ = backend_.create_stream();
  const size_t bytes = std::max<size_t>(state_bytes(operands, carried_), 1);
  const int most = int(std::clamp<size_t>(kMaxQueuedStateBytes / bytes, 1, kMaxBatch));
  std::vector<DeviceTensor> state = operands;
  int64_t done = 0;
  for (int batch = int(std::clamp<int64_t>(last_iterations_ + 1, 1, most));; batch = std::min(2 * batch, most)) {
    std::vector<std::vector<DeviceTensor>> states{state};  // before each iteration of the batch
    std::vector<std::unique_ptr<Buffer>> gates;
    for (int i = 0; i < batch; ++i) {
      Iteration it = queue_iteration(states.back(), operands, gates.empty() ? nullptr : gates.back().get());
      gates.push_back(std::move(it.gate));
      states.push_back(std::move(it.state));
    }
    stream_->sync();
    ++host_waits_;
    for (int i = 0; i < batch; ++i) {
      int32_t live = 0;
      backend_.download(*gates[size_t(i)], &live, 4);
      if (!live) {
        last_iterations_ = done + i;
        states[size_t(i)].resize(carried_);
        return states[size_t(i)];
      }
    }
    done += batch;
    state = std::move(states.back());
  }
}

}  // namespace kiln
