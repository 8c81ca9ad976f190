// Shape and dtype rules of the data-movement ops: constant, reshape, permute, slice, concat,
// split, gather, index_select, expand, pad, tile.
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

std::vector<TensorType> constant_rule(const InferContext& ctx) {
  const Literal& lit = ctx.attrs().get_tensor("value");
  if (int64_t(lit.bytes.size()) != lit.numel() * int64_t(dtype_size(lit.dtype)))
    ctx.fail("literal holds " + std::to_string(lit.bytes.size()) + " bytes, its type needs " +
             std::to_string(lit.numel() * int64_t(dtype_size(lit.dtype))));
  return {{lit.dtype, make_shape(lit.shape)}};
}

}  // namespace

void define_shape(std::vector<OpDef>& t) {
  OpDef c;
  c.kind = OpKind::Constant;
  c.attrs = {{"value", AttrType::Tensor, std::nullopt}};
  c.min_inputs = c.max_inputs = 0;
  c.infer = constant_rule;
  t.push_back(std::move(c));
}

}  // namespace kiln::ops
