// Hand-tuned GLSL templates (shaders/*.comp, embedded as text) chosen for eager ops in place of the
// generic lowering: today the tiled matmul for matmul, linear and gemm in f32, with its autotuner.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/support/disk_cache.h"

namespace kiln::vulkan {

struct MatmulTile {
  int bm = 64, bn = 64, bk = 16;  // workgroup tile and K stage
  int tm = 4, tn = 4;             // register tile of one invocation
  bool shared = true;             // stage through shared memory
  bool texel = false;             // read A and B through texel buffers (gathers on lavapipe)
  // Direct loads of 4 floats at once; problems whose sizes or layout do not allow it (transposed
  // A, K or N not a multiple of 4) run the same tile with scalar loads.
  bool vec4 = false;
};

class MatmulAutotuner;

struct TemplateOptions {
  // Products smaller than this many flops (2 * M * N * K * batch) keep the generic lowering.
  int64_t matmul_min_flops = int64_t(2) * 64 * 64 * 64;
  bool force_tile = false;  // use `tile` instead of the per-device choice (benchmarks, tests)
  MatmulTile tile;
  // When set and the op asks for max-autotune (OpRun::max_autotune, or KILN_AUTOTUNE=1): the tile
  // comes from timing candidates (borrowed; outlives the planner).
  MatmulAutotuner* autotuner = nullptr;
};

// The tiles max-autotune times: kiln-bench's set minus those whose workgroup exceeds the device's
// invocation limit.
std::vector<MatmulTile> matmul_tile_candidates(const DeviceCaps& caps);
std::string describe(const MatmulTile& tile);

struct AutotuneStats {
  size_t timed = 0;       // shape classes timed on the device in this process
  size_t disk_hits = 0;   // shape classes answered from the disk cache
  std::string last;       // "class -> tile" of the latest choice
};

// Times the matmul template's tile variants on the real problem once per (device, shape class) and
// keeps the fastest; choices persist in the disk cache ("autotune" entries).
class MatmulAutotuner {
 public:
  // `device_key` is borrowed (the backend owns it and fills it in its constructor).
  MatmulAutotuner(Backend& backend, DiskCache disk, const std::string& device_key)
      : backend_(backend), disk_(std::move(disk)), device_key_(device_key) {}
  // `launch_for(tile)` builds the launch for one tile (nullopt when the tile cannot run the
  // problem); `arg_bytes` sizes scratch buffers for the launch's args, so timing never touches the
  // op's own buffers.
  MatmulTile choose(const std::string& shape_class, const DeviceCaps& caps,
                    const std::function<std::optional<TemplateLaunch>(const MatmulTile&)>& launch_for,
                    const std::vector<size_t>& arg_bytes);
  AutotuneStats stats() const;

 private:
  Backend& backend_;
  DiskCache disk_;
  const std::string& device_key_;
  mutable std::mutex mutex_;
  std::map<std::string, MatmulTile> chosen_;  // by shape class
  AutotuneStats stats_;
};

// The tile the template uses on a device: shared-memory tiles on GPUs; on CPU devices (lavapipe),
// direct vec4 texel-buffer reads into a large register tile (shared memory is plain cache there).
MatmulTile default_matmul_tile(const DeviceCaps& caps);

// The matmul template's source for one variant: #version and the defines, then shaders/matmul.comp.
std::string matmul_source(const MatmulTile& tile, bool trans_a, bool trans_b, bool has_c);
// "#define NAME value\n": how template variants are selected in their GLSL source.
std::string glsl_define(const char* name, int value);
// `shader` with shaders/row_span.glsl in place of its "// KILN_ROW_SPAN" line.
std::string insert_row_span(const std::string& shader);
// The tiles kiln-bench's `tiles` command times, and max-autotune's candidates before the device filter.
std::vector<MatmulTile> matmul_bench_tiles();

// The planner eager ops and compiled programs ask for an op's template (Backend::plan_template).
TemplatePlanner glsl_template_planner(const TemplateOptions& options = {});

}  // namespace kiln::vulkan
