// nn::MultiheadAttention: PyTorch's parameter layout (packed in_proj, out_proj) and masking rules.
#pragma once

#include <cstdint>

#include "core/frontend/nn/layers.h"
#include "core/frontend/nn/module.h"

namespace kiln::nn {

// Scaled dot-product attention over num_heads heads of size embed_dim / num_heads. Parameters:
// in_proj_weight [3E, E] (query, key, value rows stacked), in_proj_bias [3E], out_proj.weight
// [E, E], out_proj.bias [E].
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true,
                     bool batch_first = true, Device device = Device::cpu(),
                     Seed seed = std::nullopt);
  std::string type_name() const override { return "MultiheadAttention"; }

  // query [B, L, E], key and value [B, S, E] ([L, B, E] / [S, B, E] without batch_first, or
  // unbatched [L, E] / [S, E]); returns the attention output shaped like query.
  // attn_mask [L, S] or [B * num_heads, L, S]: a float mask is added to the scores; a bool mask
  // is true where a query may NOT attend, as in PyTorch.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = {}, Loc loc = Loc::current());
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                    const Tensor& attn_mask = {}, Loc loc = Loc::current()) {
    return forward(query, key, value, attn_mask, loc);
  }

  const int64_t embed_dim, num_heads, head_dim;
  const bool batch_first;
  Tensor& in_proj_weight;
  Tensor* in_proj_bias;  // null when built with bias = false
  Linear out_proj;

 private:
  // self_attention: q, k and v are one tensor, projected by one linear with the packed weight.
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool self_attention,
                const Loc& loc);
};

}  // namespace kiln::nn
