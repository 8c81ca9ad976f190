// Host memory for the backends that run on the CPU (ref and cpu): 64-byte aligned buffers, range-
// checked copies, and one eager op run by its reference kernel on such buffers.
#pragma once

#include <cstddef>

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

// The memory of a HostBuffer (throws kiln::Error for another backend's buffer).
void* host_data(const Buffer& buffer);
void host_upload(Buffer& dst, const void* src, size_t bytes, size_t offset);
void host_download(const Buffer& src, void* dst, size_t bytes, size_t offset);
// Runs `run` by its reference kernel; every view's buffer must be a HostBuffer.
void run_reference_kernel(const OpRun& run);

}  // namespace kiln::reference
