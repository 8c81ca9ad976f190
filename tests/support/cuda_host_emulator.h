// Runs CUDA C as kiln emits it on the host CPU, for tests on machines without a GPU: sources are
// compiled by the host C++ compiler (many into one shared object, since each compile costs about
// half a second) against a shim header, loaded with dlopen and launched over a grid. The threads of
// a block run as cooperative fibers, so __syncthreads and warp shuffles (32 lanes) behave as on the
// device.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/cuda_host_emulator_abi.h"

namespace kiln::testing {

struct CudaHostEmulatorOptions {
  std::string cxx;           // host compiler; "" = the one that built the tests
  std::string cuda_include;  // where cuda_fp16.h is; "" = $CUDA_HOME/include, /usr/local/cuda/include
  bool cuda_headers = true;  // false: run as where the CUDA toolkit is missing (no __half)
  std::string optimize = "-O0";
};

class CudaHostEmulator {
 public:
  using Options = CudaHostEmulatorOptions;

  // One __global__ function of an added source.
  struct Kernel {
    std::string name;             // the source's name, for messages
    std::string entry;            // the function's name in the source
    unsigned launch_bounds = 0;   // N of __launch_bounds__(N); 0 when absent
    bool needs_fibers = false;    // the source synchronizes threads (barriers, shuffles, votes)
    size_t source = 0;            // index into sources_
    KilnEmuEntryFn fn = nullptr;  // set once built
    KilnEmuSelfSlotFn self_slot = nullptr;
  };

  struct Stats {
    size_t libraries = 0;  // shared objects compiled
    size_t sources = 0;    // sources compiled into them
    size_t launches = 0;
    double compile_seconds = 0;
  };

  explicit CudaHostEmulator(Options options = {});
  ~CudaHostEmulator();
  CudaHostEmulator(const CudaHostEmulator&) = delete;
  CudaHostEmulator& operator=(const CudaHostEmulator&) = delete;

  // Adds a source (identical text is added once); it compiles with the next build(). Returns its
  // function `entry`, or its first __global__ function for "". Throws kiln::Error when the source
  // has no such function, or uses __half and no cuda_fp16.h was found.
  const Kernel& add(const std::string& name, const std::string& source, const std::string& entry = "");
  // Compiles every source added since the last build into one shared object (two, compiled in
  // parallel, for large batches) and loads it. A source that fails to compile makes its kernels
  // throw its compiler messages at launch; the others still build.
  void build();
  // Runs `kernel` over grid x block threads, building first if needed. args[i] points to the
  // value of parameter i, as for cuLaunchKernel. Returns when every thread has finished.
  void launch(const Kernel& kernel, std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block, void** args);

  bool has_half() const { return !cuda_include_.empty(); }
  Stats stats() const;

 private:
  struct Source {
    std::string name, text;
    std::vector<std::string> entries;
    bool built = false;
    std::string error;  // compiler messages when it failed
  };
  struct Library;
  void compile_batch(const std::vector<size_t>& batch, int part);

  Options options_;
  std::string cuda_include_;
  std::string work_dir_;
  mutable std::mutex mutex_;
  std::deque<Source> sources_;
  std::map<std::string, size_t> by_text_;
  std::deque<Kernel> kernels_;
  std::map<std::pair<size_t, std::string>, Kernel*> by_entry_;
  std::vector<std::unique_ptr<Library>> libraries_;
  Stats stats_;
};

}  // namespace kiln::testing
