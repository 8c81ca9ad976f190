// Test helpers for CUDA code that cannot run here: one translation unit of distinct generated
// kernels (for NVRTC), and assembling its PTX with ptxas when the toolkit has it.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "core/kernel/emit.h"

namespace kiln::testing {

// Kernels in the CUDA dialect, each printed once (identical bodies under other names are skipped).
struct CudaBatch {
  std::string source = kernel::emit_prelude_for(kernel::Dialect::Cuda);
  int kernels = 0;
  std::set<std::string> seen;

  void add(const kernel::Kernel& k) {
    kernel::EmitOptions o;
    o.dialect = kernel::Dialect::Cuda;
    o.standalone = false;
    o.entry = "k" + std::to_string(kernels);
    std::string body = kernel::emit(k, o).source;
    std::string key = body.substr(body.find('\n'));  // without the name line
    key = key.replace(key.find(o.entry), o.entry.size(), "");
    if (!seen.insert(key).second) return;
    source += body;
    ++kernels;
  }
};

inline std::string find_ptxas() {
  std::string home = std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "/usr/local/cuda";
  for (std::string p : {home + "/bin/ptxas", std::string("/usr/bin/ptxas")})
    if (std::ifstream(p).good()) return p;
  return "";
}

// Runs ptxas on `ptx` for sm_<sm>, files under `base`.*; returns its exit code, messages in *log.
inline int assemble_ptx(const std::string& ptxas, const std::string& ptx, const std::string& sm,
                        const std::string& base, std::string* log) {
  std::ofstream(base + ".ptx") << ptx;
  const std::string cmd = ptxas + " -arch=sm_" + sm + " " + base + ".ptx -o " + base + ".cubin 2> " +
                          base + ".log";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(base + ".log");
  log->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return rc;
}

}  // namespace kiln::testing
