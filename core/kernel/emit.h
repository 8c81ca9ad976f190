// The one C-like emitter: prints a Kernel as GLSL (Vulkan) or CUDA C. Every statement carries a
// comment naming the graph nodes it computes, and the result maps each source line to them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel/dialect.h"
#include "core/kernel/kernel.h"

namespace kiln::kernel {

// Where a graph node was recorded in the user's code; line 0 when unknown.
struct SourceLine {
  std::string file;
  int line = 0;
};

struct EmitOptions {
  Dialect dialect = Dialect::Glsl;
  int workgroup_size = 256;
  // false: omit the #version/includes and helper functions, so many kernels can share one
  // translation unit (emit_prelude_for() gives that shared text).
  bool standalone = true;
  std::string entry = "";  // CUDA function name ("" = cuda_entry_name())
  // GLSL: read 32-bit inputs through uniform texel buffers. For software Vulkan devices
  // (DeviceCaps::is_cpu, lavapipe), whose storage-buffer loads are per-lane loops but whose
  // texelFetch is one gather; GPUs keep storage loads, which have no maxTexelBufferElements cap.
  bool texel_reads = false;
  // GLSL with texel_reads: a pointwise kernel whose outputs are all f32/i32 computes 4 consecutive
  // elements per invocation, reads inputs as 4-wide texels and stores one vec4. llvmpipe's
  // per-lane cost is per load/store instruction, so this moves ~2.5x the bytes per second.
  bool vec4_pointwise = false;
  // Text for a graph node id in origin comments, e.g. "%7 add @ model.cpp:12 [encoder.0]".
  std::function<std::string(int)> describe_origin;
  // CUDA: where a graph node id was recorded. Statements from a node with a known place get a
  // `#line N "file"` before them, so NVRTC's -lineinfo (and profilers, cuda-gdb) map their
  // instructions to the user's source; other lines keep the generated text's own numbering.
  std::function<SourceLine(int)> source_line;
  // The params whose value never changes (sizes without symbols); nullopt for symbolic ones. C++
  // prints them as literals, so the compiler turns index divisions by them into shifts and
  // multiplies; GLSL and CUDA choose by them whether a sum is one workgroup per output
  // (EmittedKernel::invocations_per_element).
  std::vector<std::optional<int32_t>> static_params;
};

struct EmittedKernel {
  std::string source;
  std::string entry = "main";
  std::vector<std::vector<int>> line_origins;  // per source line (0-based): origin node ids
  int workgroup_size = 256;
  int elements_per_invocation = 1;  // 4 for vec4_pointwise kernels
  // A workgroup-cooperative reduction: one workgroup per output element, its invocations striding
  // over the reduction and combining through shared memory; workgroup_size here, else 1.
  int invocations_per_element = 1;
};

EmittedKernel emit(const Kernel& kernel, const EmitOptions& options);
// The options a backend's declared target asks for (Backend::codegen()).
EmitOptions emit_options_for(const CodegenTarget& target);
// The __global__ function name CUDA kernels are emitted with by default.
std::string cuda_entry_name();
// Everything a non-standalone kernel of `dialect` needs before it, for all dtypes.
std::string emit_prelude_for(Dialect dialect);

// Workgroups to launch for `elements` iterations (x, y): y > 1 when x would pass the 65535 limit.
std::array<uint32_t, 3> launch_groups(int64_t elements, int workgroup_size);
// Workgroups for a kernel over `elements` iterations that computes `per` elements per invocation,
// or takes `invocations` invocations per element (a cooperative reduction).
std::array<uint32_t, 3> launch_groups(int64_t elements, int workgroup_size, int per, int invocations);
// Workgroups for an emitted kernel over `elements` iterations.
std::array<uint32_t, 3> launch_groups(const EmittedKernel& kernel, int64_t elements);

}  // namespace kiln::kernel
