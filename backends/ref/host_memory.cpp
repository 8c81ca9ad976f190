// Host buffers, copies and the reference-kernel call shared by the ref and cpu backends.
#include "backends/ref/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/ref/ref_kernel.h"
#include "core/support/error.h"

namespace kiln::reference {

namespace {
uint64_t new_serial() {
  static std::atomic<uint64_t> next_serial{1};
  return next_serial.fetch_add(1, std::memory_order_relaxed);
}

constexpr size_t kHuge = size_t(2) << 20;

// Freed buffers of 4 MiB and more, kept for the next buffer of the same rounded size. A fresh one
// is new pages that the kernel zeroes on first touch, and that zeroing took 30% of an eager
// ResNet-18 training step, whose every op allocates its outputs. At most an eighth of the
// machine's memory and 1 GiB stay cached; the rest is freed. Off under AddressSanitizer, which
// must see large buffers freed to catch a use after free, and with KILN_HOST_BUFFER_CACHE=0 (for
// memory tools such as valgrind, and comparisons).
class LargeBufferCache {
 public:
  static LargeBufferCache& instance() {
    static auto* cache = new LargeBufferCache;  // never destroyed: buffers may die after exit starts
    return *cache;
  }
  void* take(size_t rounded) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* data = it->second.back();
    it->second.pop_back();
    bytes_ -= rounded;
    return data;
  }
  void give_back(void* data, size_t rounded) {
    {
      std::lock_guard lock(mutex_);
      if (enabled_ && bytes_ + rounded <= limit_) {
        free_[rounded].push_back(data);
        bytes_ += rounded;
        return;
      }
    }
    std::free(data);
  }
  void clear() {
    std::lock_guard lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* data : blocks) std::free(data);
    free_.clear();
    bytes_ = 0;
  }

 private:
  LargeBufferCache() {
#if defined(__SANITIZE_ADDRESS__)
    enabled_ = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    enabled_ = false;
#endif
#endif
    const char* env = std::getenv("KILN_HOST_BUFFER_CACHE");
    if (env && std::string(env) == "0") enabled_ = false;
    const size_t memory = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(sysconf(_SC_PAGESIZE));
    limit_ = std::min(memory / 8, size_t(1) << 30);
  }
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // by rounded size, last freed last
  size_t bytes_ = 0, limit_ = 0;
  bool enabled_ = true;
};

}  // namespace

HostBuffer::HostBuffer(size_t bytes) : Buffer(bytes) {
  serial_ = new_serial();
  // 64-byte alignment suits every dtype and vector loads; never a null pointer, even for 0 bytes.
  // Buffers of 4 MiB and more are 2 MiB aligned and ask for transparent huge pages: a fresh 64 MiB
  // tensor then takes 32 page faults on first touch instead of 16384, which cost more than the
  // kernel writing it. Those come from LargeBufferCache where it holds one of their size.
  const size_t alignment = bytes >= 2 * kHuge ? kHuge : 64;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (alignment == kHuge && (data_ = LargeBufferCache::instance().take(rounded))) return;
  data_ = std::aligned_alloc(alignment, rounded == 0 ? 64 : rounded);
  if (!data_ && alignment == kHuge) {  // what the cache holds may make room
    LargeBufferCache::instance().clear();
    data_ = std::aligned_alloc(alignment, rounded);
  }
  if (!data_) throw Error("cpu: out of host memory allocating " + std::to_string(bytes) + " bytes");
  if (alignment == kHuge) madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
}

HostBuffer::~HostBuffer() {
  if (bytes() >= 2 * kHuge) LargeBufferCache::instance().give_back(data_, (bytes() + kHuge - 1) / kHuge * kHuge);
  else std::free(data_);
}

void HostBuffer::rewritten() { serial_ = new_serial(); }

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
