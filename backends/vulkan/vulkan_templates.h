// Hand-tuned GLSL templates (shaders/*.comp, embedded as text) chosen for eager ops in place of the
// generic lowering: today the tiled matmul for matmul, linear and gemm in f32.
#pragma once

#include <cstdint>
#include <string>

#include "backends/kernel_runner.h"

namespace kiln::vulkan {

struct MatmulTile {
  int bm = 64, bn = 64, bk = 16;  // workgroup tile and K stage
  int tm = 4, tn = 4;             // register tile of one invocation
  bool shared = true;             // stage through shared memory
};

struct TemplateOptions {
  // Products smaller than this many flops (2 * M * N * K * batch) keep the generic lowering.
  int64_t matmul_min_flops = int64_t(2) * 64 * 64 * 64;
  bool force_tile = false;  // use `tile` instead of the per-device choice (benchmarks, tests)
  MatmulTile tile;
};

// The tile the template uses on a device: shared-memory tiles on GPUs, direct loads with a large
// register tile on CPU devices (lavapipe), where shared memory is plain cache and barriers cost.
MatmulTile default_matmul_tile(const DeviceCaps& caps);

// The matmul template's source for one variant: #version and the defines, then shaders/matmul.comp.
std::string matmul_source(const MatmulTile& tile, bool trans_a, bool trans_b, bool has_c);

// The planner KernelRunner calls before lowering an op.
TemplatePlanner glsl_template_planner(const TemplateOptions& options = {});

}  // namespace kiln::vulkan
