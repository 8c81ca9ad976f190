// Host buffers, copies and the reference-kernel call shared by the ref and cpu backends.
#include "backends/ref/host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/ref/ref_kernel.h"
#include "core/support/error.h"

namespace kiln::reference {

HostBuffer::HostBuffer(size_t bytes) : Buffer(bytes) {
  // 64-byte alignment suits every dtype and vector loads; never a null pointer, even for 0 bytes.
  // Buffers of 4 MiB and more are 2 MiB aligned and ask for transparent huge pages: a fresh 64 MiB
  // tensor then takes 32 page faults on first touch instead of 16384, which cost more than the
  // kernel writing it.
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t alignment = bytes >= 2 * kHuge ? kHuge : 64;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  data_ = std::aligned_alloc(alignment, rounded == 0 ? 64 : rounded);
  if (!data_) throw Error("cpu: out of host memory allocating " + std::to_string(bytes) + " bytes");
  if (alignment == kHuge) madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
}

HostBuffer::~HostBuffer() { std::free(data_); }

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
