// Device memory for the CUDA backend. By default buffers come from the driver's stream-ordered pool
// (cuMemAllocAsync), which keeps freed memory for the next allocation: a compiled program returns
// fresh output buffers every call, and cuMemAlloc/cuMemFree per call would cost a driver allocation
// and a device-wide synchronization (cuMemFree waits for the GPU) each time, as PyTorch's caching
// allocator avoids too. KILN_CUDA_MEMPOOL=0 allocates with cuMemAlloc/cuMemFree instead, for memory
// checkers that need every buffer to be its own allocation.
#pragma once

#include <cstddef>

#include "backends/cuda/cuda_driver.h"

namespace kiln::cuda {

class DeviceMemory {
 public:
  DeviceMemory(const Driver& driver, CUdevice device);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Throws kiln::OutOfMemoryError when the device has no room, even after the pool gave back what
  // it keeps.
  CUdeviceptr allocate(size_t bytes);
  void release(CUdeviceptr ptr);

 private:
  const Driver& d_;
  CUmemoryPool pool_ = nullptr;  // null: cuMemAlloc/cuMemFree
};

}  // namespace kiln::cuda
