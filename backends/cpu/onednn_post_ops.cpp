// Epilogue steps as oneDNN post-ops (eltwise and binary), checked against the channel axis.
#include "backends/cpu/onednn_post_ops.h"

namespace kiln::cpu {
namespace {

using dnnl::algorithm;

struct Eltwise {
  algorithm algo;
  float alpha = 0, beta = 0;
};

std::optional<Eltwise> eltwise_of(OpKind kind, const AttrMap& attrs) {
  auto attr = [&attrs](const char* name) { return float(attrs.get_float(name)); };
  switch (kind) {
    case OpKind::Relu: return Eltwise{algorithm::eltwise_relu};
    case OpKind::LeakyRelu: return Eltwise{algorithm::eltwise_relu, attr("alpha")};
    case OpKind::Elu: return Eltwise{algorithm::eltwise_elu, attr("alpha")};
    case OpKind::Gelu:
      return Eltwise{attrs.get_string("approximate") == "tanh" ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf};
    case OpKind::Silu: return Eltwise{algorithm::eltwise_swish, 1};
    case OpKind::Sigmoid: return Eltwise{algorithm::eltwise_logistic};
    case OpKind::Tanh: return Eltwise{algorithm::eltwise_tanh};
    case OpKind::Clip: return Eltwise{algorithm::eltwise_clip_v2, attr("min"), attr("max")};
    case OpKind::Abs: return Eltwise{algorithm::eltwise_abs};
    case OpKind::Exp: return Eltwise{algorithm::eltwise_exp};
    case OpKind::Sqrt: return Eltwise{algorithm::eltwise_sqrt};
    case OpKind::Neg: return Eltwise{algorithm::eltwise_linear, -1};
    default: return std::nullopt;
  }
}

// oneDNN computes result op operand; sub and div with the operand first have no binary op.
std::optional<algorithm> binary_of(OpKind kind, bool operand_first) {
  switch (kind) {
    case OpKind::Add: return algorithm::binary_add;
    case OpKind::Mul: return algorithm::binary_mul;
    case OpKind::Maximum: return algorithm::binary_max;
    case OpKind::Minimum: return algorithm::binary_min;
    case OpKind::Sub: return operand_first ? std::nullopt : std::optional(algorithm::binary_sub);
    case OpKind::Div: return operand_first ? std::nullopt : std::optional(algorithm::binary_div);
    default: return std::nullopt;
  }
}

// The operand as a 4-d descriptor broadcast over the result: all ones, or the channel count at
// the channel axis; or the result's own descriptor for an operand of its shape, where the
// primitive's result layout is kiln's (ChannelAxis::result). Nothing for any other operand: a
// full-size one beside a blocked result would move oneDNN off its fastest kernels.
std::optional<dnnl::memory::desc> operand_desc(const BufferView& operand, const BufferView& result, const ChannelAxis& axis) {
  if (operand.dtype != DType::F32 || operand.dims.size() > result.dims.size()) return std::nullopt;
  if (axis.result && operand.dims == result.dims) return axis.result;
  dnnl::memory::dims dims{1, 1, 1, 1};
  const size_t pad = result.dims.size() - operand.dims.size();
  for (size_t i = 0; i < operand.dims.size(); ++i) {
    if (operand.dims[i] == 1) continue;
    if (pad + i != axis.dim || operand.dims[i] != result.dims[axis.dim]) return std::nullopt;
    dims[size_t(axis.desc_dim)] = operand.dims[i];
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abcd);
}

}  // namespace

size_t anchor_inputs(const OpRun& run, std::span<const EpilogueStep> epilogue) {
  size_t operands = 0;
  for (const EpilogueStep& step : epilogue) operands += step.operand >= 0;
  return run.inputs.size() - operands;
}

std::optional<PostOps> post_ops_of(const OpRun& run, std::span<const EpilogueStep> epilogue, const ChannelAxis& channels) {
  if (run.outputs.size() != 1 || run.outputs[0].dtype != DType::F32 || channels.dim >= run.outputs[0].dims.size())
    return std::nullopt;
  PostOps out;
  dnnl::post_ops ops;
  for (const EpilogueStep& step : epilogue) {
    if (step.operand < 0) {
      std::optional<Eltwise> e = eltwise_of(step.kind, *step.attrs);
      if (!e) return std::nullopt;
      ops.append_eltwise(1.0f, e->algo, e->alpha, e->beta);
      continue;
    }
    std::optional<algorithm> algo = binary_of(step.kind, step.operand_first);
    if (!algo) return std::nullopt;
    std::optional<dnnl::memory::desc> desc = operand_desc(run.inputs[size_t(step.operand)], run.outputs[0], channels);
    if (!desc) return std::nullopt;
    out.operands.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(ops.len()) | DNNL_ARG_SRC_1, *desc, step.operand});
    ops.append_binary(*algo, *desc);
  }
  out.attr.set_post_ops(ops);
  return out;
}

}  // namespace kiln::cpu
