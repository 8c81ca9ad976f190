// The CUDA backend: device memory, NVRTC-compiled programs from the CUDA dialect of the shared
// emitter or the CUDA templates, launches on a stream (timed with events while profiling), and CUDA
// graphs for record/replay. Everything CUDA is loaded at run time, so without a driver or GPU the
// registry lists no CUDA device and says why.
#include <cstring>
#include <optional>

#include "backends/backend.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_memory.h"
#include "backends/cuda/cuda_templates.h"
#include "backends/cuda/nvrtc.h"
#include "backends/template_epilogue.h"
#include "backends/template_util.h"
#include "core/support/error.h"

namespace kiln {
namespace cuda {
namespace {

class Context {
 public:
  Context(const Driver& d, int index) : d_(d) {
    d_.check(d_.cuDeviceGet(&device_, index), "cuDeviceGet");
    d_.check(d_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
    bind();
    memory_.emplace(d_, device_);
  }
  ~Context() {
    bind();
    memory_.reset();  // gives the pool's memory back while the context still exists
    d_.cuDevicePrimaryCtxRelease(device_);
  }
  void bind() const { d_.check(d_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }
  CUdevice device() const { return device_; }
  const Driver& driver() const { return d_; }
  DeviceMemory& memory() const { return *memory_; }

 private:
  const Driver& d_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  mutable std::optional<DeviceMemory> memory_;
};

class CudaBuffer : public Buffer {
 public:
  CudaBuffer(const Context& ctx, size_t bytes) : Buffer(bytes), ctx_(ctx) {
    ctx_.bind();
    ptr_ = ctx_.memory().allocate(bytes == 0 ? 4 : bytes);
  }
  ~CudaBuffer() override {
    ctx_.bind();
    ctx_.memory().release(ptr_);
  }
  CUdeviceptr ptr() const { return ptr_; }

 private:
  const Context& ctx_;
  CUdeviceptr ptr_ = 0;
};

class CudaProgram : public CompiledKernel {
 public:
  CudaProgram(const Context& ctx, const std::string& ptx, const std::string& entry, unsigned block,
              std::string name)
      : ctx_(ctx), block_(block), name_(std::move(name)) {
    ctx_.bind();
    ctx_.driver().check(ctx_.driver().cuModuleLoadData(&module_, ptx.c_str()), "cuModuleLoadData");
    ctx_.driver().check(ctx_.driver().cuModuleGetFunction(&function_, module_, entry.c_str()),
                        "cuModuleGetFunction");
  }
  ~CudaProgram() override { ctx_.driver().cuModuleUnload(module_); }
  CUfunction function() const { return function_; }
  unsigned block() const { return block_; }
  const std::string& name() const { return name_; }

 private:
  const Context& ctx_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  unsigned block_;
  std::string name_;
};

class CudaStream : public Stream {
 public:
  explicit CudaStream(const Context& ctx) : ctx_(ctx), d_(ctx.driver()) {
    ctx_.bind();
    d_.check(d_.cuStreamCreate(&stream_, 0), "cuStreamCreate");
  }
  ~CudaStream() override {
    ctx_.bind();
    d_.cuStreamSynchronize(stream_);
    for (const Timed& t : pending_) release(t);
    for (CUevent e : free_events_) d_.cuEventDestroy(e);
    if (epoch_) d_.cuEventDestroy(epoch_);
    if (exec_) d_.cuGraphExecDestroy(exec_);
    if (graph_) d_.cuGraphDestroy(graph_);
    d_.cuStreamDestroy(stream_);
  }

  void launch(const Launch& launch) override {
    auto* program = dynamic_cast<const CudaProgram*>(launch.program);
    if (!program) throw Error("cuda: launch needs a program compiled by the CUDA backend");
    if (launch.indirect)
      throw Error("cuda: launches with group counts from a buffer are not supported (DeviceCaps::indirect_launch)");
    std::vector<CUdeviceptr> ptrs;
    for (size_t i = 0; i < launch.buffers.size(); ++i) {
      auto* cb = dynamic_cast<CudaBuffer*>(launch.buffers[i]);
      if (!cb) throw Error("cuda: launch got a buffer not allocated by the CUDA backend");
      // Compiled programs bind ranges of one arena: each binding starts at its offset.
      ptrs.push_back(cb->ptr() + (launch.offsets.empty() ? 0 : launch.offsets[i]));
    }
    std::vector<void*> args;
    for (CUdeviceptr& p : ptrs) args.push_back(&p);
    // Sizes travel as one struct argument, the CUDA counterpart of Vulkan push constants.
    std::vector<uint8_t> params = launch.push_constants;
    if (!params.empty()) args.push_back(params.data());
    ctx_.bind();
    // Launches captured into a graph are not timed: an event recorded during capture becomes a
    // graph dependency, not a timestamp.
    const bool timed = timed_ && !capturing_ && pending_.size() < kMaxPendingTimings;
    Timed t{};
    if (timed) {
      if (!epoch_) {  // the stream's clock starts at its first timed launch
        d_.check(d_.cuEventCreate(&epoch_, 0), "cuEventCreate");
        d_.check(d_.cuEventRecord(epoch_, stream_), "cuEventRecord");
      }
      t = {acquire(), acquire(), program->name()};
      d_.check(d_.cuEventRecord(t.start, stream_), "cuEventRecord");
    }
    d_.check(d_.cuLaunchKernel(program->function(), launch.groups[0], launch.groups[1], launch.groups[2],
                               program->block(), 1, 1, 0, stream_, args.data(), nullptr),
             "cuLaunchKernel");
    if (timed) {
      d_.check(d_.cuEventRecord(t.stop, stream_), "cuEventRecord");
      pending_.push_back(std::move(t));
    }
  }
  void begin_recording() override {
    ctx_.bind();
    d_.check(d_.cuStreamBeginCapture(stream_, /*thread local*/ 1), "cuStreamBeginCapture");
    capturing_ = true;
  }
  void end_recording() override {
    capturing_ = false;
    // The capture ends before the previous graph goes: destroying a graph is not among the calls a
    // thread may make while it captures, and the driver would invalidate the capture.
    CUgraph graph = nullptr;
    d_.check(d_.cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture");
    if (exec_) d_.cuGraphExecDestroy(exec_);
    if (graph_) d_.cuGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = graph;
    d_.check(d_.cuGraphInstantiate(&exec_, graph_, 0), "cuGraphInstantiate");
  }
  void replay() override {
    if (!exec_) throw Error("cuda: replay() before a recording was made");
    d_.check(d_.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
  }
  void sync() override {
    ctx_.bind();
    d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
    // Every recorded event has completed now: turn the pairs into timings, in launch order.
    for (const Timed& t : pending_) {
      float ms = 0, since_epoch = 0;
      d_.check(d_.cuEventElapsedTime(&ms, t.start, t.stop), "cuEventElapsedTime");
      d_.check(d_.cuEventElapsedTime(&since_epoch, epoch_, t.start), "cuEventElapsedTime");
      timings_.push_back({t.name, double(ms) * 1000.0, double(since_epoch) * 1000.0});
      release(t);
    }
    pending_.clear();
    // Nobody may be reading them (eager streams never are): keep the newest ones only.
    if (timings_.size() > kMaxKeptTimings)
      timings_.erase(timings_.begin(), timings_.end() - std::ptrdiff_t(kMaxKeptTimings / 2));
  }
  void set_timing(bool on) override { timed_ = on; }
  std::vector<KernelTiming> timings() override {
    std::vector<KernelTiming> out;
    out.swap(timings_);
    return out;
  }

 private:
  // Launches timed between two syncs, at most: past it launches run untimed, so an eager loop that
  // never syncs does not hold an unbounded number of events.
  static constexpr size_t kMaxPendingTimings = 4096;
  static constexpr size_t kMaxKeptTimings = size_t(1) << 16;
  struct Timed {
    CUevent start, stop;
    std::string name;
  };
  CUevent acquire() {
    if (!free_events_.empty()) {
      CUevent e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
    CUevent e = nullptr;
    d_.check(d_.cuEventCreate(&e, /*CU_EVENT_DEFAULT: timing enabled*/ 0), "cuEventCreate");
    return e;
  }
  void release(const Timed& t) {
    free_events_.push_back(t.start);
    free_events_.push_back(t.stop);
  }

  const Context& ctx_;
  const Driver& d_;
  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  bool timed_ = false;  // set_timing(): off except during profiled runs
  bool capturing_ = false;
  CUevent epoch_ = nullptr;           // recorded before the first timed launch: start times count from it
  std::vector<Timed> pending_;        // launched since the last sync
  std::vector<CUevent> free_events_;  // created once, reused
  std::vector<KernelTiming> timings_;
};

DeviceCaps caps_of(const Driver& d, CUdevice dev) {
  DeviceCaps c;
  c.f16 = c.f64 = c.int64 = c.int16 = c.subgroups = true;
  int v = 0;
  d.cuDeviceGetAttribute(&v, kAttrWarpSize, dev);
  c.subgroup_size = uint32_t(v);
  d.cuDeviceGetAttribute(&v, kAttrMaxSharedPerBlock, dev);
  c.shared_memory_bytes = size_t(v);
  d.cuDeviceTotalMem(&c.memory_bytes, dev);
  c.max_workgroup_size = {1024, 1024, 64};
  c.max_workgroup_invocations = 1024;
  c.timestamps = true;
  return c;
}

std::string name_of(const Driver& d, CUdevice dev) {
  char name[256] = {};
  d.cuDeviceGetName(name, sizeof name, dev);
  return name;
}

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const Driver& d, int index) : index_(index), ctx_(d, index) {
    int major = 0, minor = 0;
    d.cuDeviceGetAttribute(&major, kAttrComputeMajor, ctx_.device());
    d.cuDeviceGetAttribute(&minor, kAttrComputeMinor, ctx_.device());
    sm_ = major * 10 + minor;
    arch_ = "compute_" + std::to_string(sm_);
    d.cuDriverGetVersion(&driver_version_);
    name_ = name_of(d, ctx_.device());
    caps_ = caps_of(d, ctx_.device());
  }
  ~CudaBackend() override { release_eager_executor(); }  // its streams and modules, before the context

  BackendKind kind() const override { return BackendKind::Cuda; }
  int index() const override { return index_; }
  std::string name() const override { return name_; }
  DeviceCaps caps() const override { return caps_; }
  bool supports(OpKind, DType) const override { return true; }

  std::unique_ptr<Buffer> allocate(size_t bytes) override { return std::make_unique<CudaBuffer>(ctx_, bytes); }
  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset) override {
    ctx_.bind();
    ctx_.driver().check(ctx_.driver().cuMemcpyHtoD(as_cuda(dst).ptr() + offset, src, bytes), "cuMemcpyHtoD");
  }
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset) override {
    ctx_.bind();
    ctx_.driver().check(ctx_.driver().cuMemcpyDtoH(dst, as_cuda(src).ptr() + offset, bytes), "cuMemcpyDtoH");
  }
  bool eager_compiles_kernels() const override { return true; }
  std::optional<TemplateLaunch> plan_template(const OpRun& run) override {
    return plan_cuda_template(run, caps_, sm_);
  }
  // Matmul and conv templates apply a pointwise chain where they store (template_epilogue.h).
  std::optional<TemplateLaunch> plan_fused_template(const OpRun& run, std::span<const EpilogueStep> epilogue) override {
    return templates::plan_template_epilogue(run, epilogue,
                                             [this](const OpRun& anchor) { return plan_cuda_template(anchor, caps_, sm_); });
  }
  bool has_template(OpKind kind) const override { return templates::has_row_or_linalg_template(kind); }
  std::optional<kernel::CodegenTarget> codegen() const override {
    return kernel::CodegenTarget{kernel::Dialect::Cuda};
  }

  std::unique_ptr<CompiledKernel> compile(const KernelSource& source) override {
    if (source.language != "cuda")
      throw Error("cuda: cannot compile '" + source.name + "' written in '" + source.language + "'");
    std::string entry;
    unsigned block = 0;
    if (!cuda_entry_point(source.text, &entry, &block))
      throw Error("cuda: kernel " + source.name + " has no __launch_bounds__(threads) entry point");
    const std::string ptx = cached_ptx(source.name, source.text, arch_, driver_version_);
    return std::make_unique<CudaProgram>(ctx_, ptx, entry, block, source.name);
  }
  std::unique_ptr<Stream> create_stream() override {
    return std::make_unique<CudaStream>(ctx_);
  }

 private:
  static CudaBuffer& as_cuda(const Buffer& b) {
    auto* cb = dynamic_cast<const CudaBuffer*>(&b);
    if (!cb) throw Error("cuda: buffer was not allocated by the CUDA backend");
    return const_cast<CudaBuffer&>(*cb);
  }

  int index_;
  Context ctx_;
  int sm_ = 0;
  std::string arch_, name_;
  int driver_version_ = 0;
  DeviceCaps caps_;
};

}  // namespace
}  // namespace cuda

BackendFactory cuda_backend_factory() {
  return {BackendKind::Cuda,
          [](std::string* why_not) {
            std::vector<DeviceEntry> out;
            const cuda::Driver* d = cuda::driver(why_not);
            if (!d) return out;
            std::string nvrtc_why;
            if (!cuda::Nvrtc::available(&nvrtc_why)) {
              if (why_not) *why_not = nvrtc_why;
              return out;
            }
            int count = 0;
            if (d->cuDeviceGetCount(&count) != 0 || count == 0) {
              if (why_not) *why_not = "the NVIDIA driver reports no CUDA device";
              return out;
            }
            for (int i = 0; i < count; ++i) {
              cuda::CUdevice dev = 0;
              d->cuDeviceGet(&dev, i);
              out.push_back({BackendKind::Cuda, i, cuda::name_of(*d, dev), cuda::caps_of(*d, dev)});
            }
            return out;
          },
          [](int index) -> std::unique_ptr<Backend> {
            std::string why;
            const cuda::Driver* d = cuda::driver(&why);
            if (!d) throw Error("cuda: " + why);
            return std::make_unique<cuda::CudaBackend>(*d, index);
          },
          [](const DeviceEntry&) { return 1; }};  // after a Vulkan GPU
}

}  // namespace kiln
