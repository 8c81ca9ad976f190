// The cpu backend's programs: generated C++ kernels (compiled in batches into shared objects) and
// host ops (a matmul or conv run by its reference kernel inside a compiled program), and the
// stream that runs them on the thread pool.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/host_compiler.h"
#include "backends/cpu/onednn_ops.h"
#include "core/support/artifacts.h"

namespace kiln::cpu {

// The trampoline every generated kernel is called through: its buffers, its int params and the
// range [begin, end) of its iteration space this call computes.
using KernelFn = void (*)(void* const* buffers, const int* params, long begin, long end);

class KernelBatcher;

class GeneratedProgram : public CompiledKernel {
 public:
  GeneratedProgram(KernelBatcher& batcher, std::string name, std::string source);
  ~GeneratedProgram() override;
  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  // The compiled function; compiles every pending kernel of the backend first if needed.
  KernelFn function() const;
  void set_function(std::shared_ptr<SharedLibrary> library, KernelFn fn);

 private:
  KernelBatcher& batcher_;
  std::string name_, source_;
  std::shared_ptr<SharedLibrary> library_;
  KernelFn fn_ = nullptr;
};

// Kernels waiting for the compiler, built together as a few translation units (one per core).
class KernelBatcher {
 public:
  // The kind of artifact (core/support/artifacts.h) a unit's shared object is recorded as.
  static constexpr const char* kArtifactKind = "cpu-so";

  void add(GeneratedProgram* program);
  void remove(GeneratedProgram* program);
  void flush();  // compiles every pending kernel; throws kiln::Error with the compiler's output

 private:
  void bind_provided(const ArtifactSet& provided, ArtifactSet* record);

  std::mutex mutex_;
  std::vector<GeneratedProgram*> pending_;
};

// One step of a host op's epilogue: an EpilogueStep kept by value.
struct HostEpilogueStep {
  OpKind kind = OpKind::Relu;
  AttrMap attrs;
  int operand = -1;
  bool operand_first = false;
  bool operator==(const HostEpilogueStep&) const = default;
};

// A matmul, conv or pool at planned shapes: its oneDNN primitive, or its reference kernel. A matmul
// or conv may carry an epilogue, whose operands follow the op's own inputs; oneDNN runs it.
struct HostOp {
  OpKind kind = OpKind::MatMul;
  AttrMap attrs;
  std::vector<DType> input_types, output_types;
  std::vector<std::vector<int64_t>> input_dims, output_dims;
  std::vector<std::vector<int64_t>> input_strides;  // per input: BufferView::strides (empty: row-major)
  std::vector<int64_t> input_offsets;               // per input: BufferView::offset, in elements
  std::vector<const Buffer*> constants;  // per input: a program constant's buffer (packed once), or null
  std::vector<bool> stable;              // per input: BufferView::stable
  std::vector<HostEpilogueStep> epilogue;
  bool operator==(const HostOp&) const = default;
  // "matmul f32[64,128] f32[128,10] -> f32[64,10]" ("conv channels_last ...", "f32[4,8]/[1,4]+8"
  // for a strided input from element 8), then " + relu" per step.
  std::string text() const;
};

class HostOpProgram : public CompiledKernel {
 public:
  explicit HostOpProgram(HostOp op);
  const HostOp& op() const { return op_; }
  // Runs the op on its operands (inputs, then outputs), bound to these buffers at these byte offsets.
  void run(std::span<Buffer* const> buffers, std::span<const size_t> offsets = {}) const;

 private:
  HostOp op_;
  std::unique_ptr<HostKernel> onednn_;
};

// Launches run at once, on the calling thread and the pool; a recording keeps the launches to
// run again (a CUDA graph's replay, minus the driver).
class CpuStream : public Stream {
 public:
  void launch(const Launch& launch) override;
  void begin_recording() override;
  void end_recording() override { recording_ = false; }
  void replay() override;
  void sync() override {}
  std::vector<KernelTiming> timings() override;
  void set_timing(bool on) override { timing_ = on; }

 private:
  void run(const Launch& launch);

  bool recording_ = false, timing_ = false;
  std::vector<Launch> recorded_;
  std::vector<void*> pointers_;  // run(): the launch's buffer addresses
  std::vector<KernelTiming> timings_;
};

}  // namespace kiln::cpu
