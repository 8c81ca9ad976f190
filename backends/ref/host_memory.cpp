// Host buffers, copies and the reference-kernel call shared by the ref and cpu backends.
#include "backends/ref/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "backends/ref/ref_kernel.h"
#include "core/support/error.h"

namespace kiln::reference {

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ADDRESS_SANITIZER 1
#endif
#endif

bool keeps_freed_buffers() {
#ifdef KILN_ADDRESS_SANITIZER
  return false;
#else
  return true;
#endif
}

namespace {

constexpr size_t kHuge = size_t(2) << 20;

// Buffers of 4 MiB and more, freed, kept for the next buffer of their size: the C library returns
// such a block to the system, and a fresh one costs a page fault per page and the system zeroing
// it, more than an elementwise op writing it (a compiled program's 64 MiB output, every call). At
// most kKeptBytes in all, the oldest given back first. Not under AddressSanitizer, which should see
// every free.
class KeptBuffers {
 public:
  static KeptBuffers& instance() {
    static KeptBuffers* kept = new KeptBuffers;  // never destroyed: buffers may outlive static objects
    return *kept;
  }
  void* take(size_t bytes) {
    std::lock_guard lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->first == bytes) {
        void* data = it->second;
        total_ -= bytes;
        kept_.erase(it);
        return data;
      }
    return nullptr;
  }
  // False where the caller frees it.
  bool keep(void* data, size_t bytes) {
    if (!keeps_freed_buffers() || bytes > kKeptBytes) return false;
    std::lock_guard lock(mutex_);
    for (; total_ + bytes > kKeptBytes; kept_.pop_front()) {
      total_ -= kept_.front().first;
      std::free(kept_.front().second);
    }
    kept_.emplace_back(bytes, data);
    total_ += bytes;
    return true;
  }

 private:
  static constexpr size_t kKeptBytes = size_t(256) << 20;
  std::mutex mutex_;
  std::deque<std::pair<size_t, void*>> kept_;  // (rounded bytes, memory), oldest first
  size_t total_ = 0;
};

size_t alignment_for(size_t bytes) { return bytes >= 2 * kHuge ? kHuge : 64; }
size_t rounded_size(size_t bytes) {
  const size_t alignment = alignment_for(bytes);
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace

HostBuffer::HostBuffer(size_t bytes) : Buffer(bytes) {
  // 64-byte alignment suits every dtype and vector loads; never a null pointer, even for 0 bytes.
  // Buffers of 4 MiB and more are 2 MiB aligned and ask for transparent huge pages: a fresh 64 MiB
  // tensor then takes 32 page faults on first touch instead of 16384, which cost more than the
  // kernel writing it; freed ones are kept for reuse (KeptBuffers).
  const size_t alignment = alignment_for(bytes), rounded = rounded_size(bytes);
  data_ = alignment == kHuge ? KeptBuffers::instance().take(rounded) : nullptr;
  if (data_) return;
  data_ = std::aligned_alloc(alignment, rounded == 0 ? 64 : rounded);
  if (!data_) throw Error("cpu: out of host memory allocating " + std::to_string(bytes) + " bytes");
  if (alignment == kHuge) madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
}

HostBuffer::~HostBuffer() {
  if (alignment_for(bytes()) == kHuge && KeptBuffers::instance().keep(data_, rounded_size(bytes()))) return;
  std::free(data_);
}

namespace {
void check_range(const Buffer& b, size_t bytes, size_t offset, const char* what) {
  if (offset + bytes > b.bytes())
    throw Error(std::string("host backend: ") + what + " of " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " exceeds the buffer's " + std::to_string(b.bytes()));
}
}  // namespace

void host_upload(Buffer& dst, const void* src, size_t bytes, size_t offset) {
  check_range(dst, bytes, offset, "upload");
  if (bytes == 0) return;  // src may be null (an empty tensor's data), which memcpy forbids
  std::memcpy(static_cast<char*>(host_data(dst)) + offset, src, bytes);
}

void host_download(const Buffer& src, void* dst, size_t bytes, size_t offset) {
  check_range(src, bytes, offset, "download");
  if (bytes == 0) return;
  std::memcpy(dst, static_cast<const char*>(host_data(src)) + offset, bytes);
}

DeviceCaps HostBackend::caps() const {
  DeviceCaps c;
  c.f16 = c.f64 = c.int64 = c.int16 = true;
  c.is_cpu = true;
  return c;
}

bool HostBackend::supports(OpKind kind, DType) const { return kernels().get(kind) != nullptr; }

void run_reference_kernel(const OpRun& run) {
  Kernel kernel = kernels().get(run.kind);
  if (!kernel) throw Error("no reference kernel for op '" + std::string(op_name(run.kind)) + "' yet");
  KernelContext ctx{run.kind, run.attrs, {}, {}};
  for (const BufferView& v : run.inputs) ctx.inputs.push_back({v.dtype, v.dims, host_data(*v.buffer)});
  for (const BufferView& v : run.outputs) ctx.outputs.push_back({v.dtype, v.dims, host_data(*v.buffer)});
  kernel(ctx);
}

}  // namespace kiln::reference
