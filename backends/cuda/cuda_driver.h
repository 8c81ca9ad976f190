// The CUDA driver API, loaded at run time from libcuda.so.1: kiln builds and runs without an NVIDIA
// driver and says which piece is missing when CUDA is asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;

// Entry points kiln uses, resolved with dlsym (versioned names where the header maps them).
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  // Stream-ordered allocation (CUDA 11.2 drivers on): null where the driver lacks it.
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, int, void*);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);

  // Throws kiln::Error "cuda: <what> failed: <driver's message>" when rc != 0.
  void check(CUresult rc, const char* what) const;
};

// The loaded driver, initialized (cuInit); nullptr with the reason when there is none.
const Driver* driver(std::string* why_not);

// Device attribute ids used (from cuda.h's CUdevice_attribute).
inline constexpr int kAttrComputeMajor = 75;
inline constexpr int kAttrComputeMinor = 76;
inline constexpr int kAttrMaxSharedPerBlock = 8;
inline constexpr int kAttrWarpSize = 10;
inline constexpr int kAttrMemoryPoolsSupported = 115;
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD and CUDA_ERROR_OUT_OF_MEMORY.
inline constexpr int kPoolAttrReleaseThreshold = 4;
inline constexpr CUresult kErrorOutOfMemory = 2;

}  // namespace kiln::cuda
