// The languages kernel IR prints to, and what a code-generating backend asks of the emitter.
#pragma once

namespace kiln::kernel {

// Cpp: C++ for the host CPU (backends/cpu), one loop over a range of the iteration space.
enum class Dialect { Glsl, Cuda, Cpp };
// The ProgramSource language a dialect's text is written in: "glsl", "cuda" or "cpp".
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
  // A kernel reads views that only it reads through their index maps rather than from a copy made
  // first. Off for generated C++: on a CPU the copy is a vectorized loop over cached data, and the
  // composed index arithmetic measured slower (BENCHMARKS Run 20).
  bool read_through_views = true;
};

}  // namespace kiln::kernel
