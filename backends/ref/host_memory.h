// Host memory for the backends that run on the CPU (ref and cpu): 64-byte aligned buffers, range-
// checked copies, one eager op run by its reference kernel on such buffers, and the base class
// holding what both backends share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/backend.h"

namespace kiln::reference {

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer() override;
  void* data() const { return data_; }

 private:
  void* data_;
};

// Whether freed HostBuffers of 4 MiB and more serve the next buffer of their size (host_memory.cpp):
// not under AddressSanitizer, which should see every free.
bool keeps_freed_buffers();

// The memory of a HostBuffer. Dispatch keeps each op's tensors on one device, so a host backend
// only ever sees its own buffers.
inline void* host_data(const Buffer& buffer) { return static_cast<const HostBuffer&>(buffer).data(); }
void host_upload(Buffer& dst, const void* src, size_t bytes, size_t offset);
void host_download(const Buffer& src, void* dst, size_t bytes, size_t offset);
// Runs `run` by its reference kernel; every view's buffer must be a HostBuffer.
void run_reference_kernel(const OpRun& run);

// A backend on host memory with every op of the reference kernel table: its caps, buffers and
// copies. Subclasses name themselves and run ops.
class HostBackend : public Backend {
 public:
  DeviceCaps caps() const override;
  bool supports(OpKind kind, DType dtype) const override;
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return std::make_unique<HostBuffer>(bytes); }
  void upload(Buffer& dst, const void* src, size_t bytes, size_t offset) override {
    host_upload(dst, src, bytes, offset);
  }
  void download(const Buffer& src, void* dst, size_t bytes, size_t offset) override {
    host_download(src, dst, bytes, offset);
  }
};

}  // namespace kiln::reference
