// Decoding of conv into ConvProblem: the checks and parameter block both backends' templates share.
#include "backends/conv_problem.h"

#include "backends/template_util.h"

namespace kiln {

using namespace templates;

std::optional<ConvProblem> decode_conv(const OpRun& run) {
  if (run.kind != OpKind::Conv || run.outputs.size() != 1) return std::nullopt;
  if (run.inputs.size() != 2 && run.inputs.size() != 3) return std::nullopt;
  if (!all_dtype(run, DType::F32)) return std::nullopt;
  const bool channels_last = is_channels_last(run.attrs);
  const std::vector<int64_t> x = channels_last ? channels_first_dims(run.inputs[0].dims) : run.inputs[0].dims;
  const auto& wt = run.inputs[1].dims;
  const std::vector<int64_t> y = channels_last ? channels_first_dims(run.outputs[0].dims) : run.outputs[0].dims;
  if (x.size() < 3 || x.size() > 4 || wt.size() != x.size() || y.size() != x.size()) return std::nullopt;
  const size_t spatial = x.size() - 2;
  ConvProblem problem;
  problem.channels_last = channels_last;
  problem.has_bias = run.inputs.size() == 3;
  if (problem.has_bias && numel(run.inputs[2].dims) != y[1]) return std::nullopt;
  for (const auto& dims : {x, wt, y})
    if (!fits_i32(numel(dims))) return std::nullopt;
  if (numel(y) == 0) return std::nullopt;

  const auto stride = spatial_attr(run.attrs, "stride", spatial, 1, 1);
  const auto pads = spatial_attr(run.attrs, "padding", spatial, 2, 0);
  const auto dilation = spatial_attr(run.attrs, "dilation", spatial, 1, 1);
  const int64_t groups = run.attrs.has("groups") ? run.attrs.get_int("groups") : 1;
  if (groups <= 0) return std::nullopt;
  ConvParams& p = problem.params;
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
  p.pw = int32_t(pads[spatial - 1]);  // pads are (begin..., end...): the last dim's begin
  p.dh = spatial == 2 ? int32_t(dilation[0]) : 1;
  p.dw = int32_t(dilation.back());
  problem.kh = spatial == 2 ? int(wt[2]) : 1;
  problem.kw = int(wt.back());
  problem.batch = y[0];
  if (int64_t(p.cg) * groups != x[1] || int64_t(p.og) * groups != y[1] || wt[1] != p.cg || wt[0] != y[1])
    return std::nullopt;
  return problem;
}

}  // namespace kiln
