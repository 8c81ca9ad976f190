// The CUDA backend's device memory (backends/cuda/cuda_memory.h) against a stand-in driver: the
// stream-ordered pool where the driver has one, cuMemAlloc where it does not or where
// KILN_CUDA_MEMPOOL=0 asks, and running out of memory: the pool gives back what it keeps and the
// allocation is tried again before kiln::OutOfMemoryError.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backends/cuda/cuda_memory.h"
#include "core/support/error.h"

namespace kiln::cuda {
namespace {

// What the stand-in driver saw, and how much device memory it has left.
struct Fake {
  size_t free_bytes = 1 << 20;
  size_t pooled_bytes = 0;  // freed into the pool, not yet trimmed
  int plain_allocs = 0, pool_allocs = 0, plain_frees = 0, pool_frees = 0, trims = 0, syncs = 0;
  bool pools_supported = true;
  CUstream alloc_stream = reinterpret_cast<CUstream>(1);
};
Fake fake;
CUmemoryPool const kPool = reinterpret_cast<CUmemoryPool>(0x10);

CUresult take(CUdeviceptr* ptr, size_t bytes) {
  if (bytes > fake.free_bytes) return kErrorOutOfMemory;
  fake.free_bytes -= bytes;
  *ptr = 0x1000;
  return 0;
}

Driver fake_driver(bool with_pool) {
  Driver d{};
  d.cuDeviceGetAttribute = [](int* v, int attr, CUdevice) {
    *v = attr == kAttrMemoryPoolsSupported && fake.pools_supported ? 1 : 0;
    return CUresult(0);
  };
  d.cuMemAlloc = [](CUdeviceptr* p, size_t n) { ++fake.plain_allocs; return take(p, n); };
  d.cuMemFree = [](CUdeviceptr) { ++fake.plain_frees; return CUresult(0); };
  d.cuCtxSynchronize = [] { ++fake.syncs; return CUresult(0); };
  d.cuGetErrorString = [](CUresult, const char** s) { *s = "stand-in error"; return CUresult(0); };
  if (!with_pool) return d;
  d.cuMemAllocAsync = [](CUdeviceptr* p, size_t n, CUstream s) {
    ++fake.pool_allocs;
    fake.alloc_stream = s;
    return take(p, n);
  };
  d.cuMemFreeAsync = [](CUdeviceptr, CUstream) { ++fake.pool_frees; return CUresult(0); };
  d.cuDeviceGetDefaultMemPool = [](CUmemoryPool* pool, CUdevice) { *pool = kPool; return CUresult(0); };
  d.cuMemPoolSetAttribute = [](CUmemoryPool, int, void*) { return CUresult(0); };
  d.cuMemPoolTrimTo = [](CUmemoryPool, size_t) {
    ++fake.trims;
    fake.free_bytes += fake.pooled_bytes;
    fake.pooled_bytes = 0;
    return CUresult(0);
  };
  return d;
}

class CudaMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    fake = Fake{};
    unsetenv("KILN_CUDA_MEMPOOL");
  }
  void TearDown() override { unsetenv("KILN_CUDA_MEMPOOL"); }
};

TEST_F(CudaMemory, UsesTheStreamOrderedPoolOnTheLegacyStream) {
  const Driver d = fake_driver(true);
  {
    DeviceMemory memory(d, 0);
    CUdeviceptr p = memory.allocate(256);
    memory.release(p);
    EXPECT_EQ(fake.pool_allocs, 1);
    EXPECT_EQ(fake.pool_frees, 1);
    EXPECT_EQ(fake.plain_allocs + fake.plain_frees, 0);
    EXPECT_EQ(fake.alloc_stream, nullptr);  // the legacy stream orders it against kiln's streams
  }
  EXPECT_EQ(fake.trims, 1);  // closing gives the pool's memory back
}

TEST_F(CudaMemory, FallsBackToCuMemAllocWithoutAPoolOrWhenAskedTo) {
  for (int how = 0; how < 3; ++how) {
    fake = Fake{};
    if (how == 1) fake.pools_supported = false;
    if (how == 2) setenv("KILN_CUDA_MEMPOOL", "0", 1);
    const Driver d = fake_driver(how != 0);  // 0: a driver without cuMemAllocAsync
    DeviceMemory memory(d, 0);
    memory.release(memory.allocate(64));
    EXPECT_EQ(fake.plain_allocs, 1) << how;
    EXPECT_EQ(fake.plain_frees, 1) << how;
    EXPECT_EQ(fake.pool_allocs, 0) << how;
  }
}

TEST_F(CudaMemory, RunningOutTrimsThePoolAndRetriesThenNamesTheSize) {
  const Driver d = fake_driver(true);
  DeviceMemory memory(d, 0);
  fake.free_bytes = 100;
  fake.pooled_bytes = 400;  // freed earlier, kept by the pool
  EXPECT_NO_THROW(memory.allocate(300));
  EXPECT_EQ(fake.trims, 1);
  EXPECT_EQ(fake.syncs, 1);
  try {
    memory.allocate(1000);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("1000 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fake.trims, 2);
}

}  // namespace
}  // namespace kiln::cuda
