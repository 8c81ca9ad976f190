// The CUDA backend's device memory: the driver's stream-ordered pool, or plain cuMemAlloc.
#include "backends/cuda/cuda_memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/support/error.h"

namespace kiln::cuda {
namespace {

// Allocations and frees go to the legacy default stream. It orders them after all earlier work of
// kiln's streams (created blocking, flag 0) and before their later work, so memory freed while a
// queued kernel still reads it is reused only after that kernel, with no wait on the host.
CUstream const kLegacyStream = nullptr;

bool pool_wanted() {
  const char* env = std::getenv("KILN_CUDA_MEMPOOL");
  return !env || std::strcmp(env, "0") != 0;
}

}  // namespace

DeviceMemory::DeviceMemory(const Driver& driver, CUdevice device) : d_(driver) {
  int supported = 0;
  if (!pool_wanted() || !d_.cuMemAllocAsync || !d_.cuMemFreeAsync || !d_.cuDeviceGetDefaultMemPool ||
      !d_.cuMemPoolSetAttribute || !d_.cuMemPoolTrimTo ||
      d_.cuDeviceGetAttribute(&supported, kAttrMemoryPoolsSupported, device) != 0 || !supported)
    return;
  CUmemoryPool pool = nullptr;
  if (d_.cuDeviceGetDefaultMemPool(&pool, device) != 0) return;
  // Keep freed memory in the pool across synchronizations instead of returning it to the OS.
  uint64_t keep_all = UINT64_MAX;
  if (d_.cuMemPoolSetAttribute(pool, kPoolAttrReleaseThreshold, &keep_all) != 0) return;
  pool_ = pool;
}

DeviceMemory::~DeviceMemory() {
  if (!pool_) return;
  d_.cuCtxSynchronize();
  d_.cuMemPoolTrimTo(pool_, 0);
}

CUdeviceptr DeviceMemory::allocate(size_t bytes) {
  CUdeviceptr ptr = 0;
  auto try_allocate = [&] {
    return pool_ ? d_.cuMemAllocAsync(&ptr, bytes, kLegacyStream) : d_.cuMemAlloc(&ptr, bytes);
  };
  CUresult rc = try_allocate();
  if (rc == kErrorOutOfMemory && pool_) {  // what the pool keeps may make room
    d_.cuCtxSynchronize();
    d_.cuMemPoolTrimTo(pool_, 0);
    rc = try_allocate();
  }
  if (rc == kErrorOutOfMemory)
    throw OutOfMemoryError("cuda: out of device memory allocating " + std::to_string(bytes) + " bytes");
  d_.check(rc, pool_ ? "cuMemAllocAsync" : "cuMemAlloc");
  return ptr;
}

void DeviceMemory::release(CUdeviceptr ptr) {
  if (pool_)
    d_.cuMemFreeAsync(ptr, kLegacyStream);
  else
    d_.cuMemFree(ptr);
}

}  // namespace kiln::cuda
