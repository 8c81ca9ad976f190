// NVRTC, loaded at run time: CUDA C -> PTX without linking the CUDA toolkit, so kiln builds and
// runs everywhere and says why when NVRTC is missing.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

struct PtxResult {
  std::string ptx;
  std::string log;  // compiler messages (warnings too)
};

class Nvrtc {
 public:
  // The process-wide NVRTC; throws kiln::Error naming the library paths tried when it is missing.
  static Nvrtc& get();
  // Whether NVRTC can be loaded here; the reason when not.
  static bool available(std::string* why_not = nullptr);

  int version() const;  // e.g. 13000 for 13.0
  // Compiles `source` for virtual architecture `arch` (e.g. "compute_80") with -lineinfo. Throws
  // kiln::Error with the program name and NVRTC's log on failure.
  PtxResult compile(const std::string& name, const std::string& source, const std::string& arch,
                    const std::vector<std::string>& extra_options = {}) const;

  struct Api;  // the resolved entry points (nvrtc.cpp)

 private:
  Nvrtc();
  Api* api_;
};

// PTX for `source` from the disk cache (core/support/disk_cache.h, kind "ptx"), else compiled by NVRTC
// and stored. The key is the source text, the architecture, NVRTC's version and the driver's version
// (0 when unknown), so a new toolkit or driver misses instead of loading stale PTX.
std::string ptx_cache_key(const std::string& source, const std::string& arch, int nvrtc_version,
                          int driver_version);
std::string cached_ptx(const std::string& name, const std::string& source, const std::string& arch,
                       int driver_version);

// The CUDA toolkit's include directory (for cuda_fp16.h): $CUDA_HOME/include or /usr/local/cuda/include;
// empty when not found.
std::string cuda_include_dir();

}  // namespace kiln::cuda
