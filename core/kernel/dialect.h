// The languages kernel IR prints to, and what a code-generating backend asks of the emitter.
#pragma once

#include <cstdint>

namespace kiln::kernel {

// Cpp: C++ for the host CPU (backends/cpu), one loop over a range of the iteration space.
enum class Dialect { Glsl, Cuda, Cpp };
// The KernelSource language a dialect's text is written in: "glsl", "cuda" or "cpp".
inline const char* language_of(Dialect d) {
  return d == Dialect::Cuda ? "cuda" : d == Dialect::Cpp ? "cpp" : "glsl";
}

// A backend that compiles generated kernels declares this: its dialect and the read/store forms
// that suit it (EmitOptions documents each).
struct CodegenTarget {
  Dialect dialect = Dialect::Glsl;
  bool texel_reads = false;
  bool vec4_pointwise = false;
  // What one kernel may bind: buffers in all, storage buffers and (texel_reads) 32-bit inputs read
  // as texels, which Vulkan counts apart, and int params. Horizontal fusion merges within them.
  int max_buffers = 256;
  int max_storage_buffers = 256;
  int max_texel_buffers = 256;
  int max_params = 256;
  // Invocations one workgroup may have (Vulkan's maxComputeWorkGroupInvocations and size x):
  // generated kernels take 256, or the largest power of two below this.
  int max_workgroup_size = 256;
  // A kernel reads views of at most this many elements that only it reads through their index
  // maps rather than from a copy made first. Generated C++ reads only small views through: on a
  // CPU the copy of a large one is a vectorized loop over cached data, and the composed index
  // arithmetic measured slower (BENCHMARKS Run 20), while a small one's copy costs a kernel run
  // for little data (an LSTM's gate slices).
  int64_t read_through_views_up_to = INT64_MAX;
};

}  // namespace kiln::kernel
