// Hand-written CUDA kernels (shaders/cuda/*, embedded as text) chosen for ops in place of the
// generic lowering: tiled f32 matmul/linear/gemm (cp.async double buffering on sm_80+), f16/bf16
// matmul on the tensor cores (wmma, sm_80+), f32 conv as an implicit GEMM, and one-block-per-row
// softmax / log_softmax / layer_norm / sum / mean / max / min. Planning needs no driver, so tests
// plan and compile every variant without a GPU.
#pragma once

#include <optional>
#include <string>

#include "backends/backend.h"

namespace kiln::cuda {

// Products smaller than this many flops (2 * M * N * K * batch) keep the generic lowering, as on
// Vulkan: launching a 64x64 tile for them costs more than the generated kernel.
inline constexpr int64_t kMatmulMinFlops = int64_t(2) * 64 * 64 * 64;

// The template launch for `run` on a device of compute capability `sm` (80 for sm_80), or nothing
// when no template takes the op (other ops or dtypes, too small, sizes past int32 or past the
// grid limits); the generic lowering runs then. Buffers in `run` may be null.
std::optional<TemplateLaunch> plan_cuda_template(const OpRun& run, const DeviceCaps& caps, int sm);

// A template's entry point and block size as written in its source: `__launch_bounds__(N) name(`,
// N a number or a macro #defined to one (templates size their blocks with #defines). False when
// the source has no such entry.
bool cuda_entry_point(const std::string& source, std::string* name, unsigned* block);

}  // namespace kiln::cuda
