// The conv template's planner: which conv ops it takes, the tile and variant defines (implicit GEMM,
// 1x1 stride-1 pointwise, depthwise), the push constants mirroring shaders/conv2d.comp.
#include "backends/vulkan/vulkan_conv_template.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "backends/conv_problem.h"
#include "backends/template_util.h"
#include "backends/vulkan/vulkan_templates.h"

namespace kiln::vulkan {
namespace {

using namespace kiln::templates;

const char kConvTemplate[] =
#include "conv2d.comp.inc"
    ;
const char kConvTexelTemplate[] =
#include "conv2d_texel.comp.inc"
    ;

// The shared-memory variant: 4x4 register tiles in 16x16 workgroups, a 64x64 output tile per
// workgroup, 16 steps of K per stage (the shape of the matmul template's shared tiles on GPUs).
constexpr ConvTile kSharedTile{.tm = 4, .tn = 4, .wg_x = 16, .wg_y = 16};
constexpr int kSharedTileK = 16;

// Shared memory the variant's tiles take: [BK][BM + 1] and [BK][BN + 1] floats.
constexpr uint32_t shared_tile_bytes(const ConvTile& t) {
  return uint32_t(kSharedTileK * (t.wg_x * t.tm + 1 + t.wg_y * t.tn + 1) * 4);
}

}  // namespace

std::string conv_source(const ConvTile& t, int kh, int kw, ConvVariant variant, int sw, int dw,
                        bool has_bias) {
  std::string s = "#version 450\n";
  auto define = [&](const char* name, int value) { s += glsl_define(name, value); };
  define("KH", kh);
  define("KW", kw);
  define("TM", t.tm);
  define("TN", t.tn);
  define("WG_X", t.wg_x);
  define("WG_Y", t.wg_y);
  define("SW", sw);
  define("DW", dw);
  define("HAS_BIAS", has_bias);
  if (variant != ConvVariant::Texel) {
    define("POINTWISE", variant == ConvVariant::Pointwise);
    define("DEPTHWISE", variant == ConvVariant::Depthwise);
    define("USE_SHARED", variant == ConvVariant::Shared);
    define("BK", kSharedTileK);
  }
  s += "#line 1\n";
  s += variant == ConvVariant::Texel ? insert_row_span(kConvTexelTemplate) : kConvTemplate;
  return s;
}

namespace {

ConvVariant choose_variant(const ConvProblem& problem, const DeviceCaps& caps, const ConvTemplateOptions& options) {
  const ConvParams& p = problem.params;
  if (p.cg == 1 && p.groups > 1) return ConvVariant::Depthwise;
  // The texel variant finds every 4 input channels of a weight row on whole texels. It unrolls 4
  // channels x taps x its tile: past 5x5 taps (a weight gradient's kernel is the output's size) the
  // shader grows past what the SPIR-V optimizer handles in reasonable time and memory.
  constexpr int kMaxTexelTaps = 25;
  if (p.cg % 4 == 0 && problem.kh * problem.kw <= kMaxTexelTaps && options.texel.value_or(caps.is_cpu))
    return ConvVariant::Texel;
  if (options.shared.value_or(!caps.is_cpu) && caps.shared_memory_bytes >= shared_tile_bytes(kSharedTile))
    return ConvVariant::Shared;
  const bool pointwise = problem.kh == 1 && problem.kw == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 &&
                         p.pw == 0 && p.oh == p.h && p.ow == p.w;
  return pointwise ? ConvVariant::Pointwise : ConvVariant::Direct;
}

const char* variant_suffix(ConvVariant variant) {
  switch (variant) {
    case ConvVariant::Depthwise: return "_dw";
    case ConvVariant::Pointwise: return "_1x1";
    case ConvVariant::Texel: return "_texel";
    case ConvVariant::Shared: return "_shared";
    case ConvVariant::Direct: break;
  }
  return "";
}

}  // namespace

std::optional<TemplateLaunch> conv_template_launch(const OpRun& run, const DeviceCaps& caps,
                                                   const ConvTemplateOptions& options) {
  const std::optional<ConvProblem> problem = decode_conv(run);
  if (!problem || problem->channels_last) return std::nullopt;  // channels-last: the generic kernel
  const ConvParams& p = problem->params;
  const int kh = problem->kh, kw = problem->kw;
  const bool has_bias = problem->has_bias;
  const int64_t groups = p.groups;
  const ConvVariant variant = choose_variant(*problem, caps, options);
  ConvTile tile;
  std::array<int64_t, 3> grid{};
  if (variant == ConvVariant::Shared) {
    tile = kSharedTile;
    grid = {(int64_t(p.oh) * p.ow + tile.wg_x * tile.tm - 1) / (tile.wg_x * tile.tm),
            (p.og + tile.wg_y * tile.tn - 1) / (tile.wg_y * tile.tn), problem->batch * groups};
  } else if (variant == ConvVariant::Depthwise) {
    // One invocation per TM adjacent pixels of a row; a workgroup spans a row (up to 16 * TM).
    tile.tm = 8;
    tile.tn = 1;
    tile.wg_x = int(std::min<int64_t>(16, pow2_at_least((p.ow + tile.tm - 1) / tile.tm)));
    tile.wg_y = 1;
    grid = {(p.ow + tile.wg_x * tile.tm - 1) / (tile.wg_x * tile.tm), p.oh, problem->batch * p.o};
  } else {
    // 8x8 register tiles in 8x8 workgroups: on lavapipe (2 cores) 4x8, 8x4, 4x4, 16x4 and 4x16
    // tiles, and 16x4 / 4x16 workgroups, all ran ResNet-18's layers 10-80% slower. Narrow groups
    // take fewer channel lanes so the tile is not mostly clamped duplicates.
    tile.wg_y = int(std::min<int64_t>(8, pow2_at_least(p.og)));
    tile.tn = int(std::min<int64_t>(8, pow2_at_least((p.og + tile.wg_y - 1) / tile.wg_y)));
    tile.wg_x = 64 / tile.wg_y;
    tile.tm = 8;
    // Few output pixels (a weight gradient's output is the kernel's size): fewer per invocation,
    // so the tile is not mostly clamped duplicates of them either.
    if (variant == ConvVariant::Direct)
      tile.tm = int(std::min<int64_t>(8, pow2_at_least((int64_t(p.oh) * p.ow + tile.wg_x - 1) / tile.wg_x)));
    // Pixels: the texel variant's invocations take TM-pixel segments of one output row.
    const int64_t m = variant == ConvVariant::Texel ? int64_t(p.oh) * ((p.ow + tile.tm - 1) / tile.tm) * tile.tm
                                                    : int64_t(p.oh) * p.ow;
    grid = {(m + tile.wg_x * tile.tm - 1) / (tile.wg_x * tile.tm),
            (p.og + tile.wg_y * tile.tn - 1) / (tile.wg_y * tile.tn), problem->batch * groups};
  }
  while (tile.wg_x * tile.wg_y > int(caps.max_workgroup_invocations) && tile.wg_x > 1) {
    tile.wg_x /= 2;
    grid[0] *= 2;
  }
  for (int64_t g : grid)
    if (g > 65535) return std::nullopt;

  TemplateLaunch launch;
  launch.name = std::string("conv2d_f32") + variant_suffix(variant) + (has_bias ? "_bias" : "");
  launch.source = conv_source(tile, kh, kw, variant, p.sw, p.dw, has_bias);
  launch.args = {0, 1};
  if (has_bias) launch.args.push_back(2);
  launch.args.push_back(int(run.inputs.size()));  // the output
  launch.push_constants = bytes_of(p);
  launch.groups = {uint32_t(grid[0]), uint32_t(grid[1]), uint32_t(grid[2])};
  return launch;
}

TemplatePlanner with_conv_template(TemplatePlanner next, ConvTemplateOptions options) {
  return [next = std::move(next), options](const OpRun& run,
                                           const DeviceCaps& caps) -> std::optional<TemplateLaunch> {
    if (run.kind == OpKind::Conv)
      if (std::optional<TemplateLaunch> launch = conv_template_launch(run, caps, options)) return launch;
    return next ? next(run, caps) : std::nullopt;
  };
}

}  // namespace kiln::vulkan
