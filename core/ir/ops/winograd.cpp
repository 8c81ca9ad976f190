// Shape rules of the Winograd F(2x2, 3x3) ops, the three steps a 3x3 stride-1 conv becomes where a
// backend runs it faster so (the winograd pass, core/passes/winograd.cpp):
//
//   u = winograd_weights(w)      [O, C, 3, 3]        -> [16, C, O]         U = G w G^T per (o, c)
//   v = winograd_input(x)        [N, C, H, W]        -> [16, N, TH, TW, C] V = B^T d B per 4x4 tile d
//   m = matmul(v, u)             (16 GEMMs, through reshapes to [16, N*TH*TW, C])
//   y = winograd_output(m)       [16, N, TH, TW, O]  -> [N, O, OH, OW]     Y = A^T m A per tile
//
// Tile (th, tw) covers output rows 2th..2th+1 and columns 2tw..2tw+1 and reads the padded input's
// 4x4 block from (2th, 2tw); TH = ceil(OH / 2), TW = ceil(OW / 2). Element 4i + j of the leading 16
// is position (i, j) of the 4x4 transformed tile. The matrices are Lavin and Gray's (2015), written
// out in core/ir/winograd_matrices.h.
#include "core/ir/op.h"
#include "core/ir/ops/define_op.h"

namespace kiln::ops {
namespace {

void require_f32_or_wider(const InferContext& ctx) {
  const TensorType& t = ctx.input(0);
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    ctx.fail("needs an f32 or f64 operand, got " + std::string(dtype_name(t.dtype)));
}

// Static ints: [top, left, bottom, right] or [OH, OW].
std::vector<int64_t> pair_attr(const InferContext& ctx, const std::string& name, size_t count) {
  std::vector<int64_t> v = ctx.attrs().get_ints(name);
  if (v.size() != count) ctx.fail("attribute '" + name + "' needs " + std::to_string(count) + " values");
  for (int64_t x : v)
    if (x < 0) ctx.fail("attribute '" + name + "' values must be >= 0, got " + std::to_string(x));
  return v;
}

// winograd_weights(w): w is [O, C, 3, 3].
std::vector<TensorType> weights_rule(const InferContext& ctx) {
  require_f32_or_wider(ctx);
  const TensorType& w = ctx.input(0);
  if (w.rank() != 4 || w.shape[2] != 3 || w.shape[3] != 3)
    ctx.fail("weight must be [out_channels, in_channels, 3, 3], got " + w.str());
  return {{w.dtype, {SymInt(16), w.shape[1], w.shape[0]}}};
}

// winograd_input(x): x is [N, C, H, W]; attribute padding [top, left, bottom, right].
std::vector<TensorType> input_rule(const InferContext& ctx) {
  require_f32_or_wider(ctx);
  const TensorType& x = ctx.input(0);
  if (x.rank() != 4) ctx.fail("input must be [N, C, H, W], got " + x.str());
  const std::vector<int64_t> pads = pair_attr(ctx, "padding", 4);
  const SymInt oh = x.shape[2] + pads[0] + pads[2] - 2, ow = x.shape[3] + pads[1] + pads[3] - 2;
  if (oh < 1 || ow < 1) ctx.fail("the padded input " + x.str() + " is smaller than the 3x3 kernel");
  return {{x.dtype, {SymInt(16), x.shape[0], (oh + 1) / 2, (ow + 1) / 2, x.shape[1]}}};
}

// winograd_output(m): m is [16, N, TH, TW, O]; attribute size [OH, OW] with TH = ceil(OH / 2).
std::vector<TensorType> output_rule(const InferContext& ctx) {
  require_f32_or_wider(ctx);
  const TensorType& m = ctx.input(0);
  if (m.rank() != 5 || m.shape[0] != 16) ctx.fail("input must be [16, N, TH, TW, O], got " + m.str());
  const std::vector<int64_t> size = pair_attr(ctx, "size", 2);
  if (m.shape[2] != SymInt((size[0] + 1) / 2) || m.shape[3] != SymInt((size[1] + 1) / 2))
    ctx.fail("tiles " + m.str() + " do not cover an output of " + std::to_string(size[0]) + "x" +
             std::to_string(size[1]) + " in 2x2 tiles");
  return {{m.dtype, {m.shape[1], m.shape[4], SymInt(size[0]), SymInt(size[1])}}};
}

}  // namespace

void define_winograd(std::vector<OpDef>& t) {
  using Ints = std::vector<int64_t>;
  t.push_back(define_op(OpKind::WinogradWeights, {}, 1, 1, weights_rule));
  t.push_back(define_op(OpKind::WinogradInput, {{"padding", AttrType::Ints, Ints{0, 0, 0, 0}}}, 1, 1, input_rule));
  t.push_back(define_op(OpKind::WinogradOutput, {{"size", AttrType::Ints, std::nullopt}}, 1, 1, output_rule));
}

}  // namespace kiln::ops
