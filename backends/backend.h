// The backend interface, small and layered: a Backend is one device (name, capabilities,
// supports()), owns buffers (alloc, upload, download), and either runs single ops for eager mode
// on precompiled kernels (execute) or compiles programs and runs them on streams (record/replay,
// timestamps); a code-generating backend's eager ops are one-node programs it holds the executor of.
// Optional slots throw kiln::Error("... not supported by backend X") by default.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/op.h"
#include "core/ir/shape.h"
#include "core/kernel/dialect.h"

namespace kiln {

// A backend by the name it registers under (backends/registry.cpp): "ref", "cpu", "vulkan", ... The
// name is all there is to it; nothing outside a backend's folder and the registry's list depends on
// which backends exist. The constants name this tree's backends for code that asks for one.
class BackendKind {
 public:
  constexpr explicit BackendKind(std::string_view name) : name_(name) {}  // a string literal
  constexpr std::string_view name() const { return name_; }
  bool operator==(const BackendKind& other) const { return name_ == other.name_; }
  auto operator<=>(const BackendKind& other) const { return name_ <=> other.name_; }

  static const BackendKind Ref;     // the reference interpreter, the oracle
  static const BackendKind Cpu;     // the host CPU, generated C++ for compiled programs
  static const BackendKind Null;    // computes nothing; plans as a GPU would
  static const BackendKind Vulkan;
  static const BackendKind Cuda;

 private:
  std::string_view name_;
};
inline constexpr BackendKind BackendKind::Ref{"ref"};
inline constexpr BackendKind BackendKind::Cpu{"cpu"};
inline constexpr BackendKind BackendKind::Null{"null"};
inline constexpr BackendKind BackendKind::Vulkan{"vulkan"};
inline constexpr BackendKind BackendKind::Cuda{"cuda"};

inline const char* backend_kind_name(BackendKind kind) { return kind.name().data(); }

struct DeviceCaps {
  bool f16 = false;
  bool f64 = false;
  bool int64 = false;
  bool int16 = false;  // 16-bit integer storage and arithmetic (i16, u16)
  bool subgroups = false;
  uint32_t subgroup_size = 1;
  size_t shared_memory_bytes = 0;
  size_t max_buffer_bytes = SIZE_MAX;
  size_t memory_bytes = 0;
  std::array<uint32_t, 3> max_workgroup_size{1, 1, 1};
  uint32_t max_workgroup_invocations = 1;
  bool timestamps = false;
  // Launches may read their group counts from a buffer when they run (Launch::indirect), so a
  // kernel on the device decides how much of later work runs (device-side loops).
  bool indirect_launch = false;
  bool is_cpu = false;  // runs on the host CPU (ref, cpu, or a software GPU like lavapipe)
};

// What a device holds in buffers kiln has allocated and not yet freed (tensors, program arenas and
// constants, template scratch), and the most it held at once since the last reset_peak(): what
// torch.cuda.memory_allocated() and max_memory_allocated() report. Memory a backend's pool keeps
// for reuse after a buffer is freed is not counted.
struct MemoryStats {
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
};

// The running totals behind a backend's MemoryStats; buffers report to it when made and freed.
class MemoryCounter {
 public:
  void add(int64_t bytes);
  void release(int64_t bytes) { allocated_.fetch_sub(bytes, std::memory_order_relaxed); }
  void reset_peak() { peak_.store(allocated_.load(std::memory_order_relaxed), std::memory_order_relaxed); }
  MemoryStats stats() const {
    return {allocated_.load(std::memory_order_relaxed), peak_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<int64_t> allocated_{0}, peak_{0};
};

// A device allocation. Backends subclass it; its memory is freed by the destructor.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes), serial_(new_serial()) {}
  virtual ~Buffer() {
    if (counter_) counter_->release(int64_t(bytes_));
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  size_t bytes() const { return bytes_; }
  // Names these contents, unique for the process: a buffer allocated later at the same address has
  // another serial, and so has this one after rewritten(). What a kernel or program derives from a
  // stable operand (BufferView::stable) can be keyed on it.
  uint64_t serial() const { return serial_; }
  // A compiled program wrote new contents over this buffer, which a tensor held (a donated input):
  // what was derived from the old contents no longer holds. A new serial.
  void rewritten() { serial_ = new_serial(); }

 private:
  static uint64_t new_serial();
  friend class Backend;  // Backend::alloc counts the buffer in
  size_t bytes_;
  uint64_t serial_;
  std::shared_ptr<MemoryCounter> counter_;  // the backend's; kept alive by the buffers it counts
};

// A buffer with its tensor type: what ops read and write.
struct BufferView {
  Buffer* buffer = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  // An input whose bytes never change while its buffer lives: a tensor's own buffer (kiln writes a
  // tensor's buffer once, when its op runs) or a program constant. A kernel may keep what it
  // derives from such an input (a packed weight) for as long as the same buffer comes back.
  // Intermediates in a program's arena are rewritten every run, and are not stable.
  bool stable = false;
  // Element strides per dim of an input a template reads in place through views (a transpose or
  // head split before a matmul, core/ir/strided_view.h), 0 where a dim broadcasts, and the element
  // the view starts at. Empty: the buffer holds `dims` row-major from its start. Only matmul
  // templates take strided inputs (decode_matmul); every other consumer gets row-major buffers.
  std::vector<int64_t> strides;
  int64_t offset = 0;
  bool row_major() const { return strides.empty(); }
};

// One eager op: kind, complete attributes, input and output buffers (outputs already allocated).
struct OpRun {
  OpKind kind;
  const AttrMap& attrs;
  std::span<const BufferView> inputs;
  std::span<const BufferView> outputs;
  // Templates time their variants on this problem and keep the fastest (Mode::MaxAutotune of the
  // compile asking; KILN_AUTOTUNE=1 turns it on for every op).
  bool max_autotune = false;
};

// One step of a template's epilogue: the op's result v becomes kind(v) for a unary op, or
// kind(v, operand) for a binary one (kind(operand, v) when operand_first). `operand` indexes the
// run's inputs: a fused template's inputs are the anchor op's own, then the epilogue's operands.
struct EpilogueStep {
  OpKind kind = OpKind::Relu;
  const AttrMap* attrs = nullptr;
  int operand = -1;
  bool operand_first = false;
};

// One kernel's source in a backend's language, for Backend::compile.
struct KernelSource {
  std::string name;
  std::string language;  // "glsl", "cuda"
  std::string text;
};

// What Backend::compile makes of a KernelSource, ready to launch: a Vulkan pipeline, a CUDA
// function, a loaded C++ function. (A whole compiled graph is a DeviceProgram, core/runtime.)
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
};

struct Launch {
  const CompiledKernel* program = nullptr;
  std::vector<Buffer*> buffers;
  // Byte offset of each binding into its buffer (empty: all 0), so kernels can address ranges of one
  // arena. Multiples of 256, which satisfies every Vulkan device's minStorageBufferOffsetAlignment.
  std::vector<size_t> offsets;
  std::vector<uint8_t> push_constants;
  std::array<uint32_t, 3> groups{1, 1, 1};
  // Where DeviceCaps::indirect_launch: when set, the group counts are the three u32 at this byte
  // offset of `indirect` (a multiple of 4) when the launch runs, at most `groups` each; 0 runs nothing.
  Buffer* indirect = nullptr;
  size_t indirect_offset = 0;
};

struct KernelTiming {
  std::string name;
  double microseconds = 0;
  // When the launch started, in microseconds on its stream's clock (the device's timestamps, or the
  // host's steady clock where kernels run on the host): comparable between timings of one stream,
  // so gaps and overlap between launches show. Unset where a backend records durations only.
  std::optional<double> start_us;
};

// An ordered queue of launches; can record a sequence once and replay it.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual void launch(const Launch& launch) = 0;
  virtual void begin_recording() = 0;
  virtual void end_recording() = 0;
  virtual void replay() = 0;
  virtual void sync() = 0;
  virtual std::vector<KernelTiming> timings() { return {}; }
  // Whether launches from now on are timed. Vulkan timestamps cost nothing on the host and stay on;
  // CUDA events cost two calls per launch, so the CUDA stream times only while asked to.
  virtual void set_timing(bool) {}
};

// One launch of a hand-written kernel chosen for an op instead of its generic lowering.
struct TemplateLaunch {
  std::string name;
  std::string source;                 // the whole program text, variant defines included
  std::string language = "glsl";      // what `source` is written in: "glsl", "cuda"
  std::vector<int> args;              // op buffer slots (inputs, then outputs) bound in order
  std::vector<uint8_t> push_constants;
  std::array<uint32_t, 3> groups{1, 1, 1};
};

// A backend's choice of template for an op at its sizes, or nothing where the generic lowering
// runs (Backend::plan_template asks one; tests force a variant with their own).
using TemplatePlanner = std::function<std::optional<TemplateLaunch>(const OpRun&, const DeviceCaps&)>;

struct EagerStats {
  size_t ops = 0;
  size_t launches = 0;
  size_t template_launches = 0;
  size_t syncs = 0;  // sync() calls that had launches to wait for
};

// Runs a code-generating backend's eager ops, queued in order on one stream. core/runtime's
// EagerPrograms is the one kind (each op a one-node program from compile_graph's stages); the
// runtime hands it to the backend at the first eager op, so its programs live as long as the backend.
class EagerExecutor {
 public:
  virtual ~EagerExecutor() = default;
  virtual void run(const OpRun& run) = 0;  // queues the op's launches
  virtual void sync() = 0;                 // waits for every queued launch; cheap when none is
  virtual EagerStats stats() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  virtual int index() const { return 0; }
  virtual std::string name() const = 0;  // human-readable device name
  virtual DeviceCaps caps() const = 0;
  virtual bool supports(OpKind kind, DType dtype) const = 0;

  // A buffer of `bytes`, counted in memory_stats() until it is freed.
  std::unique_ptr<Buffer> alloc(size_t bytes);
  MemoryStats memory_stats() const { return memory_->stats(); }
  void reset_peak_memory() { memory_->reset_peak(); }
  virtual void upload(Buffer& dst, const void* src, size_t bytes, size_t offset = 0) = 0;
  virtual void download(const Buffer& src, void* dst, size_t bytes, size_t offset = 0) = 0;

  // Eager mode where the backend runs precompiled kernels (eager_compiles_kernels() false): runs
  // one op now. Elsewhere eager ops run as one-node programs (core/runtime/eager_programs.h) and
  // this throws.
  virtual void execute(const OpRun& run);
  // Waits until every eager op queued has finished, so work on another stream (a compiled program)
  // can read its results. By default: waits for the eager executor.
  virtual void synchronize() { sync_eager(); }
  // Whether eager ops generate and compile kernels: each op a one-node program compiled by
  // compile_graph's stages on its first call (GPU backends). Where they do not, eager ops run
  // precompiled kernels through execute() (cpu, ref), and eager work spanning several ops, a
  // backward pass, runs them node by node too instead of waiting on a compiler.
  virtual bool eager_compiles_kernels() const { return false; }
  // The executor of eager ops where eager_compiles_kernels(); null until the runtime attaches one.
  EagerExecutor* eager_executor() const { return eager_ready_.load(std::memory_order_acquire); }
  // Attaches `make`'s executor unless one is attached already (two threads may race to the first
  // eager op); returns the one attached.
  EagerExecutor& attach_eager_executor(const std::function<std::unique_ptr<EagerExecutor>()>& make);
  // Waits for the eager executor's queued launches (none made yet: returns at once), and its counters.
  void sync_eager();
  EagerStats eager_stats() const;

  // Optional: a tuned template for this op (shapes from `run`; buffers may be null), or nothing
  // when the generic lowering should run. Compiled programs ask this too; there an input whose
  // buffer is set is a program constant: its contents never change, so a template may pack it once.
  virtual std::optional<TemplateLaunch> plan_template(const OpRun&) { return std::nullopt; }
  // Optional: a template for an op with pointwise consumers fused into its epilogue. `run` names
  // the anchor op (its kind and attributes), its inputs followed by the epilogue's operands, and
  // the epilogue's last result as its output. Nothing when the backend does not fuse these steps
  // here: the anchor's group then runs its generic kernel.
  virtual std::optional<TemplateLaunch> plan_fused_template(const OpRun&, std::span<const EpilogueStep>) {
    return std::nullopt;
  }

  // Optional: code generation backends. codegen() says what kernel IR is printed as for compile();
  // nullopt means compiled graphs run node by node through execute() (the reference interpreter).
  virtual std::optional<kernel::CodegenTarget> codegen() const { return std::nullopt; }
  // Ops that may run as a tuned template (plan_template) when they are alone in a kernel: fusion
  // leaves them alone where the template serves their shapes.
  virtual bool has_template(OpKind) const { return false; }
  // Optional: whether this 4-d conv or window pool (as `run` gives it, channels-first) runs faster
  // in compiled programs with channels-last activations: the channels-last pass then gives it them.
  virtual bool prefers_channels_last(const OpRun&) { return false; }
  // Optional: whether this op, one with an expansion into other ops (OpDef::expand: a conv's input
  // and weight gradients), runs faster in compiled programs as itself than as its expansion. The
  // expand-ops pass expands those it declines.
  virtual bool runs_unexpanded(const OpRun&) { return false; }
  // Optional: whether this conv (one the winograd pass covers: 3x3, stride 1, f32, channels-first) runs
  // faster in compiled programs as Winograd F(2x2, 3x3), a GEMM per transformed tile position
  // between two memory-bound transforms. The winograd pass rewrites those it picks.
  virtual bool prefers_winograd(const OpRun&) { return false; }
  // Optional: whether this conv (one group, channels-first, static sizes) runs faster in compiled
  // programs as im2col and one matmul per image. The conv-as-matmul pass rewrites those it picks.
  virtual bool prefers_conv_as_matmul(const OpRun&) { return false; }
  virtual std::unique_ptr<CompiledKernel> compile(const KernelSource& source);
  // Every kernel of one program at once, in order: a backend whose compiler is a process (cpu)
  // builds them as a few translation units instead of one per kernel. Defaults to compile() each.
  virtual std::vector<std::unique_ptr<CompiledKernel>> compile_all(const std::vector<KernelSource>& sources);
  virtual std::unique_ptr<Stream> create_stream();
  // Optional: what `source` compiles to, as text (SPIR-V assembly on Vulkan), for debug bundles;
  // empty where the backend has no such listing.
  virtual std::string disassemble(const KernelSource&) { return {}; }

 protected:
  // The backend's own allocation, behind alloc().
  virtual std::unique_ptr<Buffer> allocate(size_t bytes) = 0;
  // A backend with an eager executor calls this first in its destructor: the executor's stream
  // and programs go before the device they run on.
  void release_eager_executor();

 private:
  std::shared_ptr<MemoryCounter> memory_ = std::make_shared<MemoryCounter>();
  std::mutex eager_mutex_;  // guards making the executor
  std::unique_ptr<EagerExecutor> eager_;
  std::atomic<EagerExecutor*> eager_ready_{nullptr};  // eager_, read without the lock
};

// The registry of devices this build can reach.
struct DeviceEntry {
  BackendKind kind;
  int index;
  std::string name;
  DeviceCaps caps;
  // Lower is better. Device::best() picks the best device ranked below kOnlyByName; the others
  // (software GPUs, the interpreter, null) run only when named.
  int rank = 0;
};
inline constexpr int kOnlyByName = 10;

// Every usable device, best first (by rank; ties in the registry's order).
std::vector<DeviceEntry> available_devices();
// The backends built into this kiln, in the registry's order, and whether a backend's device names
// carry an index ("vulkan:1") or not ("cpu").
std::vector<BackendKind> registered_backends();
bool backend_is_indexed(BackendKind kind);
// The backend object for a device, created on first use and kept for the process. Throws
// kiln::Error saying why when the device is not available.
Backend& backend_for(BackendKind kind, int index);
// Makes backend_for(kind, index) return `backend` for the rest of the process (tests: a host
// emulation of a GPU). available_devices() does not list it. Throws if that device is already open.
Backend& install_backend(BackendKind kind, int index, std::unique_ptr<Backend> backend);

// What a backend registers (one line of backends/registry.cpp): its name, how to list and open
// its devices, and how good each device is.
struct BackendFactory {
  BackendKind kind;
  // Devices this backend can open; empty when none (the reason goes to `why_not`).
  std::vector<DeviceEntry> (*enumerate)(std::string* why_not);
  std::unique_ptr<Backend> (*open)(int index);
  // The device's rank (DeviceEntry::rank).
  int (*rank)(const DeviceEntry& device);
  // Whether devices are named with their index ("vulkan:1"); a single-device backend is "cpu".
  bool indexed = true;
};

}  // namespace kiln
