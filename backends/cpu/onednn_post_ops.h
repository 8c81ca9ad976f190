// A template epilogue (Backend::plan_fused_template) as oneDNN post-ops, for the cpu backend's
// matmul and convolution primitives. Only built with oneDNN (KILN_HAVE_DNNL).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backends/backend.h"

namespace kiln::cpu {

// A binary post-op's second operand: the memory argument it binds and the op slot it reads.
struct PostOpOperand {
  int dnnl_arg = 0;
  dnnl::memory::desc desc;
  int slot = 0;
};

struct PostOps {
  dnnl::primitive_attr attr;
  std::vector<PostOpOperand> operands;
};

// Where a primitive's result keeps its channels: `dim` of the op's output dims, and `desc_dim` of
// the 4-d descriptor the primitive writes ({N, C, H, W} for conv, {batch0, batch1, M, N} for matmul).
// `result`, where set, is the descriptor of the result as the primitive writes it: an operand of the
// result's shape is read in that layout too (a residual beside a channels-last conv).
struct ChannelAxis {
  size_t dim = 1;
  int desc_dim = 1;
  std::optional<dnnl::memory::desc> result;
};

// The post-ops for `epilogue`, whose operands are inputs of `run`; nothing when a step has none:
// - relu, leaky_relu, elu, gelu, silu, sigmoid, tanh, clip, abs, exp, sqrt and neg are eltwise ops;
// - add, mul, maximum and minimum (either operand order), sub and div (the result first) are binary
//   ops whose f32 operand is a scalar, runs along the channel axis only, or (with
//   ChannelAxis::result) has the result's shape.
std::optional<PostOps> post_ops_of(const OpRun& run, std::span<const EpilogueStep> epilogue, const ChannelAxis& channels);

// How many inputs of a fused run belong to the anchor op: the rest are the epilogue's operands.
size_t anchor_inputs(const OpRun& run, std::span<const EpilogueStep> epilogue);

}  // namespace kiln::cpu
