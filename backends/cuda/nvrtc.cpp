// Runtime loading of libnvrtc with dlopen; only the handful of entry points kiln uses.
#include "backends/cuda/nvrtc.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <span>

#include "core/support/disk_cache.h"
#include "core/support/error.h"

namespace kiln::cuda {
namespace {

using nvrtcResult = int;
using nvrtcProgram = void*;

std::vector<std::string> library_candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("KILN_NVRTC_PATH")) paths.push_back(env);
  for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) paths.push_back(name);
  std::string home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
  paths.push_back(home + "/lib64/libnvrtc.so");
  return paths;
}

}  // namespace

struct Nvrtc::Api {
  void* handle = nullptr;
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int*, int*) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram*) = nullptr;
  std::string error;  // why loading failed
};

namespace {

Nvrtc::Api* load() {
  auto* api = new Nvrtc::Api();
  std::string tried;
  for (const std::string& path : library_candidates()) {
    api->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->handle) break;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  if (!api->handle) {
    api->error = "NVRTC (libnvrtc.so) was not found (tried " + tried +
                 "); install the CUDA toolkit or set KILN_NVRTC_PATH";
    return api;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api->handle, name));
    if (!fn && api->error.empty()) api->error = std::string("libnvrtc lacks ") + name;
  };
  sym(api->GetErrorString, "nvrtcGetErrorString");
  sym(api->Version, "nvrtcVersion");
  sym(api->CreateProgram, "nvrtcCreateProgram");
  sym(api->CompileProgram, "nvrtcCompileProgram");
  sym(api->GetPTXSize, "nvrtcGetPTXSize");
  sym(api->GetPTX, "nvrtcGetPTX");
  sym(api->GetProgramLogSize, "nvrtcGetProgramLogSize");
  sym(api->GetProgramLog, "nvrtcGetProgramLog");
  sym(api->DestroyProgram, "nvrtcDestroyProgram");
  return api;
}

Nvrtc::Api& shared_api() {
  static Nvrtc::Api* api = load();  // process lifetime: dlclose at exit is never needed
  return *api;
}

}  // namespace

Nvrtc::Nvrtc() : api_(&shared_api()) {
  if (!api_->error.empty()) throw Error("cuda: " + api_->error);
}

Nvrtc& Nvrtc::get() {
  static Nvrtc instance;
  return instance;
}

bool Nvrtc::available(std::string* why_not) {
  const Api& api = shared_api();
  if (why_not) *why_not = api.error;
  return api.error.empty();
}

int Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->Version(&major, &minor);
  return major * 1000 + minor * 10;
}

PtxResult Nvrtc::compile(const std::string& name, const std::string& source, const std::string& arch,
                         const std::vector<std::string>& extra_options) const {
  nvrtcProgram program = nullptr;
  nvrtcResult rc = api_->CreateProgram(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (rc != 0) throw Error("cuda: nvrtcCreateProgram failed for " + name + ": " + api_->GetErrorString(rc));
  std::vector<std::string> options = {"--gpu-architecture=" + arch, "-lineinfo", "--std=c++17"};
  if (std::string inc = cuda_include_dir(); !inc.empty()) options.push_back("-I" + inc);
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  rc = api_->CompileProgram(program, int(argv.size()), argv.data());
  PtxResult result;
  size_t log_size = 0;
  api_->GetProgramLogSize(program, &log_size);
  if (log_size > 1) {
    result.log.resize(log_size);
    api_->GetProgramLog(program, result.log.data());
    result.log.resize(log_size - 1);
  }
  if (rc != 0) {
    api_->DestroyProgram(&program);
    throw Error("cuda: NVRTC could not compile kernel " + name + " for " + arch + ":\n" + result.log);
  }
  size_t ptx_size = 0;
  api_->GetPTXSize(program, &ptx_size);
  result.ptx.resize(ptx_size);
  api_->GetPTX(program, result.ptx.data());
  if (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();
  api_->DestroyProgram(&program);
  return result;
}

std::string ptx_cache_key(const std::string& source, const std::string& arch, int nvrtc_version,
                          int driver_version) {
  return "cuda ptx " + arch + " nvrtc " + std::to_string(nvrtc_version) + " driver " +
         std::to_string(driver_version) + "\n" + source;
}

std::string cached_ptx(const std::string& name, const std::string& source, const std::string& arch,
                       int driver_version) {
  const Nvrtc& nvrtc = Nvrtc::get();
  const DiskCache cache = DiskCache::from_env();
  const std::string key = ptx_cache_key(source, arch, nvrtc.version(), driver_version);
  if (std::optional<std::vector<uint8_t>> hit = cache.load("ptx", key))
    return std::string(hit->begin(), hit->end());
  std::string ptx = nvrtc.compile(name, source, arch).ptx;
  cache.store("ptx", key, std::span(reinterpret_cast<const uint8_t*>(ptx.data()), ptx.size()));
  return ptx;
}

std::string cuda_include_dir() {
  std::string home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
  struct stat st;
  std::string dir = home + "/include";
  return stat((dir + "/cuda_fp16.h").c_str(), &st) == 0 ? dir : "";
}

}  // namespace kiln::cuda
