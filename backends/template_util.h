// Small helpers the template planners of every backend share: element counts, power-of-two sizes,
// int32 range checks, attribute defaults and the push-constant bytes of a parameter struct.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kiln::templates {

// The ops the Vulkan and CUDA backends have tuned templates for: matmul/linear/gemm, conv, and the
// row ops (softmax, log_softmax, layer_norm, reductions over the innermost axes).
inline bool has_row_or_linalg_template(OpKind kind) {
  switch (kind) {
    case OpKind::MatMul: case OpKind::Linear: case OpKind::Gemm: case OpKind::Conv:
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNorm: case OpKind::Sum:
    case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::Prod:
      return true;
    default:
      return false;
  }
}

inline int64_t pow2_at_least(int64_t v) {
  int64_t r = 1;
  while (r < v) r *= 2;
  return r;
}

// Whether v is a valid non-negative int32: templates index with 32-bit ints.
inline bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// Whether every input and output of `run` has dtype t.
inline bool all_dtype(const OpRun& run, DType t) {
  for (const BufferView& v : run.inputs)
    if (v.dtype != t) return false;
  for (const BufferView& v : run.outputs)
    if (v.dtype != t) return false;
  return true;
}

// How an epilogue operand lines up with a template's result: one value for all, one per element of
// the result's dim `channel` (conv's channels, a matmul's columns), or one per element. Nothing for
// another shape, a dtype other than f32 or a strided view.
enum class OperandSpread { Scalar, AlongChannel, Full };
inline std::optional<OperandSpread> operand_spread(const BufferView& operand, const BufferView& result,
                                                   size_t channel) {
  if (operand.dtype != DType::F32 || !operand.row_major() || operand.dims.size() > result.dims.size())
    return std::nullopt;
  if (operand.dims == result.dims) return OperandSpread::Full;
  const size_t pad = result.dims.size() - operand.dims.size();
  bool scalar = true, along_channel = true;
  for (size_t i = 0; i < operand.dims.size(); ++i) {
    if (operand.dims[i] == 1) continue;
    scalar = false;
    along_channel = along_channel && pad + i == channel && operand.dims[i] == result.dims[channel];
  }
  if (scalar) return OperandSpread::Scalar;
  if (along_channel) return OperandSpread::AlongChannel;
  return std::nullopt;
}

// A per-spatial-dim int list attribute (strides, pads, dilations), `fill` when absent or empty.
inline std::vector<int64_t> spatial_attr(const AttrMap& attrs, const std::string& name, size_t spatial,
                                         size_t per_dim, int64_t fill) {
  std::vector<int64_t> v = attrs.has(name) ? attrs.get_ints(name) : std::vector<int64_t>{};
  if (v.empty()) v.assign(spatial * per_dim, fill);
  return v;
}

// The bytes of a parameter struct as push constants / a kernel's struct argument.
template <class P>
std::vector<uint8_t> bytes_of(const P& params) {
  std::vector<uint8_t> bytes(sizeof params);
  std::memcpy(bytes.data(), &params, sizeof params);
  return bytes;
}

}  // namespace kiln::templates
