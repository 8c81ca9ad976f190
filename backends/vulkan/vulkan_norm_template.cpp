// The row templates' planner: which softmax / layer_norm / reduction ops they take (f32, reduced
// elements innermost and contiguous), the team and workgroup shape, the variant defines and the
// push constants mirroring shaders/softmax.comp, layernorm.comp and reduce.comp.
#include "backends/vulkan/vulkan_norm_template.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/template_util.h"
#include "backends/vulkan/vulkan_templates.h"

namespace kiln::vulkan {
namespace {

using namespace kiln::templates;

const char kRowReduce[] =
#include "row_reduce.glsl.inc"
    ;
const char kSoftmaxTemplate[] =
#include "softmax.comp.inc"
    ;
const char kLayerNormTemplate[] =
#include "layernorm.comp.inc"
    ;
const char kReduceTemplate[] =
#include "reduce.comp.inc"
    ;

// Mirrors the push-constant blocks (std430): softmax and reduce stop after `lanes`.
struct RowParams {
  int32_t rows, n, lanes;
  float eps;
};

// Values in shaders/row_reduce.glsl.
enum RedOp { kRedSum = 0, kRedMax = 1, kRedMin = 2, kRedProd = 3 };

// x seen as [rows, n] with the n reduced elements of each row contiguous.
struct Rows {
  int64_t rows = 1, n = 1;
};

// Rows of a reduction over the dims in `reduced`: they must be the innermost dims once size-1 dims
// (which do not change the memory order) are left out.
std::optional<Rows> innermost_rows(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  Rows r;
  bool kept_seen = false;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] == 1) continue;
    if (reduced[i]) {
      if (kept_seen) return std::nullopt;
      r.n *= dims[i];
    } else {
      kept_seen = true;
    }
  }
  const int64_t total = numel(dims);
  if (total == 0 || r.n == 0) return std::nullopt;
  r.rows = total / r.n;
  return r;
}

std::optional<Rows> rows_of(const OpRun& run) {
  const std::vector<int64_t>& dims = run.inputs[0].dims;
  const int64_t rank = int64_t(dims.size());
  std::vector<bool> reduced(dims.size(), false);
  switch (run.kind) {
    case OpKind::Softmax: case OpKind::LogSoftmax: {
      int64_t d = run.attrs.get_int("dim");
      if (d < 0) d += std::max<int64_t>(rank, 1);
      if (rank > 0) reduced[size_t(d)] = true;
      break;
    }
    case OpKind::LayerNorm: {
      int64_t axis = run.attrs.get_int("axis");
      if (axis < 0) axis += rank;
      for (int64_t i = axis; i < rank; ++i) reduced[size_t(i)] = true;
      break;
    }
    default: {
      const std::vector<int64_t> list = run.attrs.get_ints("dims");
      if (list.empty()) reduced.assign(dims.size(), true);
      for (int64_t d : list) reduced[size_t(d < 0 ? d + rank : d)] = true;
    }
  }
  return innermost_rows(dims, reduced);
}

std::string row_source(const std::vector<std::pair<const char*, int>>& defines, const char* body) {
  std::string s = "#version 450\n";
  for (const auto& [name, value] : defines) s += glsl_define(name, value);
  s += "#line 1\n";
  s += kRowReduce;
  s += "#line 1\n";
  s += body;
  return s;
}

}  // namespace

bool is_norm_template_op(OpKind kind) {
  switch (kind) {
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNorm: case OpKind::Sum:
    case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::Prod:
      return true;
    default:
      return false;
  }
}

std::optional<TemplateLaunch> norm_template_launch(const OpRun& run, const DeviceCaps& caps,
                                                   const NormTemplateOptions& options) {
  if (!is_norm_template_op(run.kind) || run.inputs.empty() || run.outputs.size() != 1) return std::nullopt;
  const bool layer_norm = run.kind == OpKind::LayerNorm;
  if (!layer_norm && run.inputs.size() != 1) return std::nullopt;
  // f16 inputs keep the generic lowering, which converts in the kernel.
  for (const BufferView& v : run.inputs)
    if (v.dtype != DType::F32) return std::nullopt;
  if (run.outputs[0].dtype != DType::F32) return std::nullopt;
  const std::optional<Rows> r = rows_of(run);
  if (!r || r->rows * r->n > INT32_MAX) return std::nullopt;
  if (layer_norm)
    for (size_t i = 1; i < run.inputs.size(); ++i)
      if (numel(run.inputs[i].dims) != r->n) return std::nullopt;

  // On CPU devices (lavapipe) a workgroup is a loop over SIMD vectors on one thread and each
  // barrier switches between them: one vector per workgroup (the subgroup size) ran softmax and
  // sum on [4096, 1024] 2-4x faster than 64 lanes (kiln-bench norm). GPUs get 256 lanes per row.
  int64_t wg = options.workgroup > 0 ? options.workgroup
               : caps.is_cpu        ? std::clamp<int64_t>(pow2_at_least(caps.subgroup_size), 4, 64)
                                    : 256;
  while (wg > 1 && (wg > int64_t(caps.max_workgroup_invocations) || wg > int64_t(caps.max_workgroup_size[0])))
    wg /= 2;
  const int64_t lanes = std::min(wg, pow2_at_least(r->n));
  const int64_t groups = (r->rows + wg / lanes - 1) / (wg / lanes);
  const int64_t groups_x = std::min<int64_t>(groups, 65535);
  const int64_t groups_y = (groups + groups_x - 1) / groups_x;
  if (groups_y > 65535) return std::nullopt;
  // Subgroup arithmetic combines a whole workgroup's team; teams smaller than the workgroup may
  // share a subgroup, so they reduce through shared memory.
  const bool subgroup = options.subgroups && caps.subgroups && lanes == wg;
  // lavapipe: texelFetch gathers a SIMD row of lanes where a storage load loops over them. The
  // texel-buffer size limit is at least 2^27 elements there (and the generic kernels hit it too).
  const bool texel = caps.is_cpu && r->rows * r->n <= (int64_t(1) << 27);
  const int64_t vpt = std::min<int64_t>(16, pow2_at_least((r->n + lanes - 1) / lanes));

  TemplateLaunch launch;
  RowParams params{int32_t(r->rows), int32_t(r->n), int32_t(lanes), 0.0f};
  size_t param_bytes = 3 * sizeof(int32_t);
  std::vector<std::pair<const char*, int>> defines = {
      {"WG", int(wg)}, {"SUBGROUP", subgroup}, {"TEXEL", texel}};
  const char* body = nullptr;
  if (run.kind == OpKind::Softmax || run.kind == OpKind::LogSoftmax) {
    const bool log = run.kind == OpKind::LogSoftmax;
    defines.push_back({"VPT", int(vpt)});
    defines.push_back({"LOG", log});
    body = kSoftmaxTemplate;
    launch.name = log ? "log_softmax_rows_f32" : "softmax_rows_f32";
    launch.args = {0, 1};
  } else if (layer_norm) {
    const bool weight = run.inputs.size() >= 2, bias = run.inputs.size() == 3;
    defines.push_back({"VPT", int(vpt)});
    defines.push_back({"HAS_WEIGHT", weight});
    defines.push_back({"HAS_BIAS", bias});
    body = kLayerNormTemplate;
    launch.name = std::string("layer_norm_rows_f32") + (weight ? "_w" : "") + (bias ? "_b" : "");
    launch.args = {0};
    for (size_t i = 1; i < run.inputs.size(); ++i) launch.args.push_back(int(i));
    launch.args.push_back(int(run.inputs.size()));
    params.eps = float(run.attrs.get_float("eps"));
    param_bytes = sizeof params;
  } else {
    const RedOp op = run.kind == OpKind::ReduceMax   ? kRedMax
                     : run.kind == OpKind::ReduceMin ? kRedMin
                     : run.kind == OpKind::Prod      ? kRedProd
                                                     : kRedSum;
    defines.push_back({"OP", op});
    defines.push_back({"MEAN", run.kind == OpKind::Mean});
    body = kReduceTemplate;
    launch.name = std::string(op_name(run.kind)) + "_rows_f32";
    launch.args = {0, 1};
  }
  launch.source = row_source(defines, body);
  launch.push_constants.resize(param_bytes);
  std::memcpy(launch.push_constants.data(), &params, param_bytes);
  launch.groups = {uint32_t(groups_x), uint32_t(groups_y), 1};
  return launch;
}

TemplatePlanner with_norm_template(TemplatePlanner next, NormTemplateOptions options) {
  return [next = std::move(next), options](const OpRun& run,
                                           const DeviceCaps& caps) -> std::optional<TemplateLaunch> {
    if (is_norm_template_op(run.kind))
      if (std::optional<TemplateLaunch> launch = norm_template_launch(run, caps, options)) return launch;
    return next ? next(run, caps) : std::nullopt;
  };
}

}  // namespace kiln::vulkan
