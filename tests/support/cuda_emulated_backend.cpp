// The "cuda-emulated" test backend: host buffers, CUDA programs run by CudaHostEmulator, streams
// that launch at once (and record launches for replay, as CUDA graphs do).
#include "support/cuda_emulated_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_templates.h"
#include "core/support/error.h"

namespace kiln::testing {
namespace {

// Host memory that ends at an inaccessible page: a kernel reading or writing past the end of its
// buffer faults at once (the emulator names the kernel) instead of corrupting the heap. The start is
// 16-byte aligned, so up to 15 bytes of slack past the end go unnoticed.
class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : Buffer(bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t used = (std::max<size_t>(bytes, 4) + 15) / 16 * 16;
    mapped_ = (used + page - 1) / page * page + page;
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("cuda-emulated: out of host memory allocating " + std::to_string(bytes) + " bytes");
    base_ = static_cast<uint8_t*>(p);
    mprotect(base_ + mapped_ - page, page, PROT_NONE);
    data_ = base_ + mapped_ - page - used;
  }
  ~HostBuffer() override { munmap(base_, mapped_); }
  uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t mapped_ = 0;
};

HostBuffer& host(const Buffer& b) {
  auto* h = dynamic_cast<const HostBuffer*>(&b);
  if (!h) throw Error("cuda-emulated: buffer was not allocated by the cuda-emulated backend");
  return const_cast<HostBuffer&>(*h);
}

class EmulatedProgram : public CompiledKernel {
 public:
  EmulatedProgram(const CudaHostEmulator::Kernel& kernel, unsigned block) : kernel_(kernel), block_(block) {}
  const CudaHostEmulator::Kernel& kernel() const { return kernel_; }
  unsigned block() const { return block_; }

 private:
  const CudaHostEmulator::Kernel& kernel_;
  unsigned block_;
};

class EmulatedStream : public Stream {
 public:
  explicit EmulatedStream(CudaHostEmulator& emulator) : emulator_(emulator) {}

  void launch(const Launch& launch) override {
    if (recording_) {
      recorded_.push_back(launch);
      return;
    }
    run(launch);
  }
  void begin_recording() override {
    recording_ = true;
    recorded_.clear();
  }
  void end_recording() override { recording_ = false; }
  void replay() override {
    for (const Launch& l : recorded_) run(l);
  }
  void sync() override {}

 private:
  void run(const Launch& launch) {
    auto* program = dynamic_cast<const EmulatedProgram*>(launch.program);
    if (!program) throw Error("cuda-emulated: launch needs a program compiled by the cuda-emulated backend");
    std::vector<void*> pointers;
    for (size_t i = 0; i < launch.buffers.size(); ++i)
      pointers.push_back(host(*launch.buffers[i]).data() + (launch.offsets.empty() ? 0 : launch.offsets[i]));
    std::vector<void*> args;
    for (void*& p : pointers) args.push_back(&p);
    // Sizes travel as one struct argument, as on the CUDA backend.
    std::vector<uint8_t> params = launch.push_constants;
    if (!params.empty()) args.push_back(params.data());
    emulator_.launch(program->kernel(), launch.groups, {program->block(), 1, 1}, args.data());
  }

  CudaHostEmulator& emulator_;
  bool recording_ = false;
  std::vector<Launch> recorded_;
};

TemplatePlanner planner(int sm) {
  if (sm <= 0) return {};
  return [sm](const OpRun& run, const DeviceCaps& caps) { return cuda::plan_cuda_template(run, caps, sm); };
}

}  // namespace

CudaEmulatedBackend::CudaEmulatedBackend(CudaEmulatedOptions options)
    : emulator_(options.emulator),
      templates_(planner(options.template_sm)) {}

// The eager executor's queued launches and programs go before the emulator that runs them.
CudaEmulatedBackend::~CudaEmulatedBackend() { release_eager_executor(); }

DeviceCaps CudaEmulatedBackend::caps() const {
  DeviceCaps c;  // a small CUDA GPU: what the device code may assume
  c.f16 = emulator_.has_half();
  c.f64 = c.int64 = c.int16 = c.subgroups = true;
  c.subgroup_size = 32;
  c.shared_memory_bytes = 48 * 1024;
  c.memory_bytes = size_t(4) << 30;
  c.max_workgroup_size = {1024, 1024, 64};
  c.max_workgroup_invocations = 1024;
  return c;
}

bool CudaEmulatedBackend::supports(OpKind, DType dtype) const {
  return dtype != DType::F16 || emulator_.has_half();
}

std::unique_ptr<Buffer> CudaEmulatedBackend::allocate(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

void CudaEmulatedBackend::upload(Buffer& dst, const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > dst.bytes()) throw Error("cuda-emulated: upload past the end of a buffer");
  if (bytes == 0) return;  // src may be null (an empty tensor's data), which memcpy forbids
  std::memcpy(host(dst).data() + offset, src, bytes);
}

void CudaEmulatedBackend::download(const Buffer& src, void* dst, size_t bytes, size_t offset) {
  if (offset + bytes > src.bytes()) throw Error("cuda-emulated: download past the end of a buffer");
  if (bytes == 0) return;
  std::memcpy(dst, host(src).data() + offset, bytes);
}

std::unique_ptr<CompiledKernel> CudaEmulatedBackend::compile(const KernelSource& source) {
  if (source.language != "cuda")
    throw Error("cuda-emulated: cannot compile '" + source.name + "' written in '" + source.language + "'");
  // The entry and block size the CUDA backend would launch (macro block sizes resolved).
  std::string entry;
  unsigned block = 0;
  if (!cuda::cuda_entry_point(source.text, &entry, &block))
    throw Error("cuda-emulated: kernel " + source.name + " has no __launch_bounds__(threads) entry point");
  return std::make_unique<EmulatedProgram>(emulator_.add(source.name, source.text, entry), block);
}

std::unique_ptr<Stream> CudaEmulatedBackend::create_stream() { return std::make_unique<EmulatedStream>(emulator_); }

}  // namespace kiln::testing
