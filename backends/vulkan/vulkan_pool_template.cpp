// The pooling template's planner: which pools it takes, the defines of its variant (window, stride
// and dilation along the row, max or average, texel reads) and the push constants mirroring
// shaders/pool2d.comp.
#include "backends/vulkan/vulkan_pool_template.h"

#include <algorithm>
#include <array>

#include "backends/template_util.h"
#include "backends/vulkan/vulkan_templates.h"

namespace kiln::vulkan {
namespace {

using namespace kiln::templates;

const char kPoolTemplate[] =
#include "pool2d.comp.inc"
    ;

constexpr int kOutputsPerInvocation = 8;

struct PoolProblem {
  PoolParams params{};
  int64_t planes = 0;  // images * channels
  int kh = 1, kw = 1, sw = 1, dw = 1;
};

std::optional<PoolProblem> decode_pool(const OpRun& run) {
  if ((run.kind != OpKind::MaxPool && run.kind != OpKind::AvgPool) || run.inputs.size() != 1 ||
      run.outputs.size() != 1 || !all_dtype(run, DType::F32) || is_channels_last(run.attrs))
    return std::nullopt;
  const std::vector<int64_t>& x = run.inputs[0].dims;
  const std::vector<int64_t>& y = run.outputs[0].dims;
  if (x.size() < 3 || x.size() > 4 || y.size() != x.size() || x[0] != y[0] || x[1] != y[1]) return std::nullopt;
  if (!fits_i32(numel(x)) || !fits_i32(numel(y)) || numel(y) == 0) return std::nullopt;
  const size_t spatial = x.size() - 2;
  const std::vector<int64_t> kernel = run.attrs.get_ints("kernel");
  if (kernel.size() != spatial) return std::nullopt;
  const auto stride = spatial_attr(run.attrs, "stride", spatial, 1, 1);
  const auto pads = spatial_attr(run.attrs, "padding", spatial, 2, 0);
  const auto dilation = spatial_attr(run.attrs, "dilation", spatial, 1, 1);
  const bool two_d = spatial == 2;
  PoolProblem problem;
  PoolParams& p = problem.params;
  p.c = int32_t(x[1]);
  p.h = two_d ? int32_t(x[2]) : 1;
  p.w = int32_t(x.back());
  p.oh = two_d ? int32_t(y[2]) : 1;
  p.ow = int32_t(y.back());
  p.sh = two_d ? int32_t(stride[0]) : 1;
  p.dh = two_d ? int32_t(dilation[0]) : 1;
  p.ph = two_d ? int32_t(pads[0]) : 0;
  p.pw = int32_t(pads[spatial - 1]);
  p.ph_end = two_d ? int32_t(pads[spatial]) : 0;
  p.pw_end = int32_t(pads.back());
  problem.planes = x[0] * x[1];
  problem.kh = two_d ? int(kernel[0]) : 1;
  problem.kw = int(kernel.back());
  problem.sw = int(stride.back());
  problem.dw = int(dilation.back());
  // The taps unroll at compile time: keep the window and the row span small.
  if (problem.kh * problem.kw > 64 || (kOutputsPerInvocation - 1) * problem.sw + (problem.kw - 1) * problem.dw >= 256)
    return std::nullopt;
  return problem;
}

}  // namespace

std::optional<TemplateLaunch> pool_template_launch(const OpRun& run, const DeviceCaps& caps,
                                                   const PoolTemplateOptions& options) {
  const std::optional<PoolProblem> problem = decode_pool(run);
  if (!problem) return std::nullopt;
  const PoolParams& p = problem->params;
  // A texel view ends at the last whole texel: the input's floats must fill whole texels.
  const bool texel = options.texel.value_or(caps.is_cpu) && numel(run.inputs[0].dims) % 4 == 0;
  const int tm = kOutputsPerInvocation;
  int wg_x = int(std::min<int64_t>(16, pow2_at_least((p.ow + tm - 1) / tm)));
  wg_x = std::min<int>(wg_x, int(caps.max_workgroup_invocations));
  const std::array<int64_t, 3> grid = {(p.ow + wg_x * tm - 1) / (wg_x * tm), p.oh, problem->planes};
  for (int64_t g : grid)
    if (g > 65535) return std::nullopt;

  const bool max = run.kind == OpKind::MaxPool;
  std::string s = "#version 450\n";
  auto define = [&](const char* name, int value) { s += glsl_define(name, value); };
  define("KH", problem->kh);
  define("KW", problem->kw);
  define("SW", problem->sw);
  define("DW", problem->dw);
  define("TM", tm);
  define("WG_X", wg_x);
  define("MAX", max);
  define("COUNT_PAD", !max && run.attrs.has("count_include_pad") && run.attrs.get_bool("count_include_pad"));
  define("TEXEL", texel);
  s += "#line 1\n";
  s += insert_row_span(kPoolTemplate);

  TemplateLaunch launch;
  launch.name = std::string(max ? "max_pool_f32" : "avg_pool_f32") + (texel ? "_texel" : "");
  launch.source = std::move(s);
  launch.args = {0, 1};
  launch.push_constants = bytes_of(p);
  launch.groups = {uint32_t(grid[0]), uint32_t(grid[1]), uint32_t(grid[2])};
  return launch;
}

TemplatePlanner with_pool_template(TemplatePlanner next, PoolTemplateOptions options) {
  return [next = std::move(next), options](const OpRun& run,
                                           const DeviceCaps& caps) -> std::optional<TemplateLaunch> {
    if (run.kind == OpKind::MaxPool || run.kind == OpKind::AvgPool)
      if (std::optional<TemplateLaunch> launch = pool_template_launch(run, caps, options)) return launch;
    return next ? next(run, caps) : std::nullopt;
  };
}

}  // namespace kiln::vulkan
