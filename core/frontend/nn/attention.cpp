// nn::MultiheadAttention: projections, per-head scaled dot-product attention, output projection.
#include "core/frontend/nn/attention.h"

#include <cmath>
#include <limits>

#include "core/frontend/dispatch.h"
#include "core/frontend/factories.h"
#include "core/frontend/ops.h"

namespace kiln::nn {
namespace {

int64_t checked_head_dim(int64_t embed_dim, int64_t num_heads) {
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads)
    throw Error("MultiheadAttention: embed_dim (" + std::to_string(embed_dim) +
                ") must be positive and divisible by num_heads (" + std::to_string(num_heads) +
                ")");
  return embed_dim / num_heads;
}

}  // namespace

// xavier_uniform in_proj_weight, zero biases, out_proj.weight as Linear's default: as PyTorch does.
MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool with_bias,
                                       bool batch_first, Device device, Seed seed)
    : embed_dim(embed_dim),
      num_heads(num_heads),
      head_dim(checked_head_dim(embed_dim, num_heads)),
      batch_first(batch_first),
      in_proj_weight(register_parameter(
          "in_proj_weight", uniform_init({3 * embed_dim, embed_dim},
                                         std::sqrt(6.0 / double(4 * embed_dim)), device,
                                         derive_seed(seed, 0)))),
      in_proj_bias(with_bias ? &register_parameter("in_proj_bias", zeros({3 * embed_dim}, device))
                             : nullptr),
      out_proj(embed_dim, embed_dim, with_bias, device, derive_seed(seed, 1)) {
  if (out_proj.bias) *out_proj.bias = zeros({embed_dim}, device);
  register_module("out_proj", out_proj);
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, Loc loc) {
  ScopeGuard guard = scope();
  auto fail = [&](const std::string& why) {
    std::string inputs = query.type().str() + ", " + key.type().str() + ", " + value.type().str();
    if (attn_mask.defined()) inputs += ", mask " + attn_mask.type().str();
    throw Error(describe() + " (" + inputs + ") at " + short_location(loc) + ": " + why);
  };
  if (!query.defined() || !key.defined() || !value.defined())
    throw Error(describe() + " at " + short_location(loc) + ": query, key and value are required");
  int64_t rank = query.dim();
  if ((rank != 2 && rank != 3) || key.dim() != rank || value.dim() != rank)
    fail("query, key and value must all be 3-d (batched) or all 2-d (unbatched)");
  if (attn_mask.defined() && attn_mask.dim() != 2 && attn_mask.dim() != 3)
    fail("attn_mask must be [L, S] or [batch * num_heads, L, S]");

  // Work batch-first; an unbatched call is a batch of one.
  auto to_batch_first = [&](const Tensor& t) {
    if (rank == 2) return unsqueeze(t, 0, loc);
    return batch_first ? t : transpose(t, 0, 1, loc);
  };
  const bool self_attention = &query.impl() == &key.impl() && &key.impl() == &value.impl();
  Tensor out = attend(to_batch_first(query), to_batch_first(key), to_batch_first(value), attn_mask,
                      self_attention, loc);
  if (rank == 2) return squeeze(out, 0, loc);
  return batch_first ? out : transpose(out, 0, 1, loc);
}

Tensor MultiheadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                  bool self_attention, const Loc& loc) {
  SymInt batch = q.shape()[0], q_len = q.shape()[1], kv_len = k.shape()[1];
  // [B, len, heads * head_dim] -> [B, heads, len, head_dim]
  auto heads = [&](const Tensor& projected, const SymInt& len) {
    return transpose(reshape(projected, {batch, len, num_heads, head_dim}, loc), 1, 2, loc);
  };
  Tensor qh, kh, vh;
  if (self_attention) {  // one matmul, as PyTorch's in-projection of packed weights
    Tensor qkv = linear(q, in_proj_weight, in_proj_bias ? *in_proj_bias : Tensor(), loc);  // [B, L, 3E]
    std::vector<Tensor> parts = split(qkv, embed_dim, -1, loc);
    qh = heads(parts[0], q_len), kh = heads(parts[1], q_len), vh = heads(parts[2], q_len);
  } else {
    std::vector<Tensor> w = split(in_proj_weight, embed_dim, 0, loc);
    std::vector<Tensor> b(3);
    if (in_proj_bias) b = split(*in_proj_bias, embed_dim, 0, loc);
    qh = heads(linear(q, w[0], b[0], loc), q_len);
    kh = heads(linear(k, w[1], b[1], loc), kv_len);
    vh = heads(linear(v, w[2], b[2], loc), kv_len);
  }

  Tensor scores = mul(matmul(qh, transpose(kh, -2, -1, loc), loc),
                      1.0 / std::sqrt(double(head_dim)), loc);  // [B, H, L, S]
  if (attn_mask.defined()) {
    Tensor mask = attn_mask.dim() == 3
                      ? reshape(attn_mask, {batch, num_heads, q_len, kv_len}, loc)
                      : attn_mask;
    if (mask.dtype() == DType::Bool) {
      Tensor masked_out = scalar_operand(-std::numeric_limits<double>::infinity(), scores, loc);
      scores = where(mask, masked_out, scores, loc);
    } else {
      scores = add(scores, mask, loc);
    }
  }
  Tensor attn = softmax(scores, -1, loc);
  Tensor out = transpose(matmul(attn, vh, loc), 1, 2, loc);  // [B, L, H, head_dim]
  return out_proj(reshape(out, {batch, q_len, embed_dim}, loc), loc);
}

}  // namespace kiln::nn
