// dlopen/dlsym of libcuda.so.1 and cuInit, once per process.
#include "backends/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <type_traits>

#include "core/support/error.h"

namespace kiln::cuda {
namespace {

struct Loaded {
  Driver driver{};
  std::string error;
};

Loaded load() {
  Loaded l;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) handle = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    l.error = "the NVIDIA driver library libcuda.so.1 was not found (no NVIDIA driver installed)";
    return l;
  }
  Driver& d = l.driver;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    if (!fn && l.error.empty()) l.error = std::string("libcuda.so.1 lacks ") + name;
  };
  sym(d.cuInit, "cuInit");
  sym(d.cuGetErrorString, "cuGetErrorString");
  sym(d.cuDriverGetVersion, "cuDriverGetVersion");
  sym(d.cuDeviceGetCount, "cuDeviceGetCount");
  sym(d.cuDeviceGet, "cuDeviceGet");
  sym(d.cuDeviceGetName, "cuDeviceGetName");
  sym(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  sym(d.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  sym(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  sym(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  sym(d.cuCtxSetCurrent, "cuCtxSetCurrent");
  sym(d.cuMemAlloc, "cuMemAlloc_v2");
  sym(d.cuMemFree, "cuMemFree_v2");
  sym(d.cuCtxSynchronize, "cuCtxSynchronize");
  sym(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  sym(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  sym(d.cuModuleLoadData, "cuModuleLoadData");
  sym(d.cuModuleUnload, "cuModuleUnload");
  sym(d.cuModuleGetFunction, "cuModuleGetFunction");
  sym(d.cuLaunchKernel, "cuLaunchKernel");
  sym(d.cuStreamCreate, "cuStreamCreate");
  sym(d.cuStreamDestroy, "cuStreamDestroy_v2");
  sym(d.cuStreamSynchronize, "cuStreamSynchronize");
  sym(d.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
  sym(d.cuStreamEndCapture, "cuStreamEndCapture");
  sym(d.cuGraphInstantiate, "cuGraphInstantiateWithFlags");
  sym(d.cuGraphLaunch, "cuGraphLaunch");
  sym(d.cuGraphExecDestroy, "cuGraphExecDestroy");
  sym(d.cuGraphDestroy, "cuGraphDestroy");
  sym(d.cuEventCreate, "cuEventCreate");
  sym(d.cuEventRecord, "cuEventRecord");
  sym(d.cuEventElapsedTime, "cuEventElapsedTime_v2");
  sym(d.cuEventDestroy, "cuEventDestroy_v2");
  auto optional = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
  };
  optional(d.cuMemAllocAsync, "cuMemAllocAsync");
  optional(d.cuMemFreeAsync, "cuMemFreeAsync");
  optional(d.cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool");
  optional(d.cuMemPoolSetAttribute, "cuMemPoolSetAttribute");
  optional(d.cuMemPoolTrimTo, "cuMemPoolTrimTo");
  if (!l.error.empty()) return l;
  if (CUresult rc = d.cuInit(0); rc != 0) {
    const char* msg = nullptr;
    d.cuGetErrorString(rc, &msg);
    l.error = std::string("cuInit failed: ") + (msg ? msg : "unknown error") +
              " (driver present, but no usable NVIDIA GPU)";
  }
  return l;
}

}  // namespace

void Driver::check(CUresult rc, const char* what) const {
  if (rc == 0) return;
  const char* msg = nullptr;
  cuGetErrorString(rc, &msg);
  throw Error(std::string("cuda: ") + what + " failed: " + (msg ? msg : "error " + std::to_string(rc)));
}

const Driver* driver(std::string* why_not) {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) {
    if (why_not) *why_not = loaded.error;
    return nullptr;
  }
  return &loaded.driver;
}

}  // namespace kiln::cuda
