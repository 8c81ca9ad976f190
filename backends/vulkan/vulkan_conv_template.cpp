// The conv template's planner: which conv ops it takes, the tile and variant defines (implicit GEMM,
// 1x1 stride-1 pointwise, depthwise), the push constants mirroring shaders/conv2d.comp.
#include "backends/vulkan/vulkan_conv_template.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "backends/vulkan/vulkan_templates.h"

namespace kiln::vulkan {
namespace {

const char kConvTemplate[] =
#include "conv2d.comp.inc"
    ;

// Mirrors the push-constant block of shaders/conv2d.comp (scalar layout).
struct ConvParams {
  int32_t c, h, w;
  int32_t o, oh, ow;
  int32_t cg, og;
  int32_t groups;
  int32_t sh, sw, ph, pw, dh, dw;
};

std::vector<int64_t> spatial_attr(const AttrMap& attrs, const std::string& name, size_t spatial,
                                  size_t per_dim, int64_t fill) {
  std::vector<int64_t> v = attrs.has(name) ? attrs.get_ints(name) : std::vector<int64_t>{};
  if (v.empty()) v.assign(spatial * per_dim, fill);
  return v;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int pow2_at_least(int64_t v) {
  int r = 1;
  while (r < v) r *= 2;
  return r;
}

bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

}  // namespace

std::string conv_source(const ConvTile& t, int kh, int kw, bool pointwise, bool depthwise, int sw,
                        int dw, bool has_bias) {
  std::string s = "#version 450\n";
  auto define = [&](const char* name, int value) { s += glsl_define(name, value); };
  define("KH", kh);
  define("KW", kw);
  define("TM", t.tm);
  define("TN", t.tn);
  define("WG_X", t.wg_x);
  define("WG_Y", t.wg_y);
  define("POINTWISE", pointwise);
  define("DEPTHWISE", depthwise);
  define("SW", sw);
  define("DW", dw);
  define("HAS_BIAS", has_bias);
  s += "#line 1\n";
  s += kConvTemplate;
  return s;
}

std::optional<TemplateLaunch> conv_template_launch(const OpRun& run, const DeviceCaps& caps) {
  if (run.kind != OpKind::Conv || run.outputs.size() != 1) return std::nullopt;
  if (run.inputs.size() != 2 && run.inputs.size() != 3) return std::nullopt;
  for (const BufferView& v : run.inputs)
    if (v.dtype != DType::F32) return std::nullopt;
  if (run.outputs[0].dtype != DType::F32) return std::nullopt;
  const auto& x = run.inputs[0].dims;
  const auto& wt = run.inputs[1].dims;
  const auto& y = run.outputs[0].dims;
  if (x.size() < 3 || x.size() > 4 || wt.size() != x.size() || y.size() != x.size()) return std::nullopt;
  const size_t spatial = x.size() - 2;
  const bool has_bias = run.inputs.size() == 3;
  if (has_bias && numel(run.inputs[2].dims) != y[1]) return std::nullopt;
  for (const auto& dims : {x, wt, y})
    if (!fits_i32(numel(dims))) return std::nullopt;
  if (numel(y) == 0) return std::nullopt;  // nothing to launch; the generic path skips it

  const auto stride = spatial_attr(run.attrs, "stride", spatial, 1, 1);
  const auto pads = spatial_attr(run.attrs, "padding", spatial, 2, 0);
  const auto dilation = spatial_attr(run.attrs, "dilation", spatial, 1, 1);
  const int64_t groups = run.attrs.has("groups") ? run.attrs.get_int("groups") : 1;
  ConvParams p{};
  p.c = int32_t(x[1]);
  p.h = spatial == 2 ? int32_t(x[2]) : 1;
  p.w = int32_t(x.back());
  p.o = int32_t(y[1]);
  p.oh = spatial == 2 ? int32_t(y[2]) : 1;
  p.ow = int32_t(y.back());
  p.groups = int32_t(groups);
  p.cg = int32_t(x[1] / groups);
  p.og = int32_t(y[1] / groups);
  p.sh = spatial == 2 ? int32_t(stride[0]) : 1;
  p.sw = int32_t(stride.back());
  p.ph = spatial == 2 ? int32_t(pads[0]) : 0;
  p.pw = int32_t(pads[spatial - 1]);
  p.dh = spatial == 2 ? int32_t(dilation[0]) : 1;
  p.dw = int32_t(dilation.back());
  const int kh = spatial == 2 ? int(wt[2]) : 1, kw = int(wt.back());
  if (p.cg * groups != x[1] || p.og * groups != y[1] || wt[1] != p.cg) return std::nullopt;

  const bool depthwise = p.cg == 1 && groups > 1;
  const bool pointwise = !depthwise && kh == 1 && kw == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 &&
                         p.pw == 0 && p.oh == p.h && p.ow == p.w;
  ConvTile tile;
  std::array<int64_t, 3> grid{};
  if (depthwise) {
    // One invocation per TM adjacent pixels of a row; a workgroup spans a row (up to 16 * TM).
    tile.tm = 8;
    tile.tn = 1;
    tile.wg_x = std::min(16, pow2_at_least((p.ow + tile.tm - 1) / tile.tm));
    tile.wg_y = 1;
    grid = {(p.ow + tile.wg_x * tile.tm - 1) / (tile.wg_x * tile.tm), p.oh, int64_t(y[0]) * p.o};
  } else {
    // 8x8 register tiles in 8x8 workgroups: on lavapipe (2 cores) 4x8, 8x4, 4x4, 16x4 and 4x16
    // tiles, and 16x4 / 4x16 workgroups, all ran ResNet-18's layers 10-80% slower. Narrow groups
    // take fewer channel lanes so the tile is not mostly clamped duplicates.
    tile.wg_y = std::min(8, pow2_at_least(p.og));
    tile.tn = std::min(8, pow2_at_least((p.og + tile.wg_y - 1) / tile.wg_y));
    tile.wg_x = 64 / tile.wg_y;
    tile.tm = 8;
    const int64_t m = int64_t(p.oh) * p.ow;
    grid = {(m + tile.wg_x * tile.tm - 1) / (tile.wg_x * tile.tm),
            (p.og + tile.wg_y * tile.tn - 1) / (tile.wg_y * tile.tn), int64_t(y[0]) * groups};
  }
  while (tile.wg_x * tile.wg_y > int(caps.max_workgroup_invocations) && tile.wg_x > 1) {
    tile.wg_x /= 2;
    grid[0] *= 2;
  }
  for (int64_t g : grid)
    if (g > 65535) return std::nullopt;

  TemplateLaunch launch;
  launch.name = std::string("conv2d_f32") + (depthwise ? "_dw" : pointwise ? "_1x1" : "") +
                (has_bias ? "_bias" : "");
  launch.source = conv_source(tile, kh, kw, pointwise, depthwise, p.sw, p.dw, has_bias);
  launch.args = {0, 1};
  if (has_bias) launch.args.push_back(2);
  launch.args.push_back(int(run.inputs.size()));  // the output
  launch.push_constants.resize(sizeof p);
  std::memcpy(launch.push_constants.data(), &p, sizeof p);
  launch.groups = {uint32_t(grid[0]), uint32_t(grid[1]), uint32_t(grid[2])};
  return launch;
}

TemplatePlanner with_conv_template(TemplatePlanner next) {
  return [next = std::move(next)](const OpRun& run, const DeviceCaps& caps) -> std::optional<TemplateLaunch> {
    if (run.kind == OpKind::Conv)
      if (std::optional<TemplateLaunch> launch = conv_template_launch(run, caps)) return launch;
    return next ? next(run, caps) : std::nullopt;
  };
}

}  // namespace kiln::vulkan
