// winograd: a 3x3 stride-1 conv the backend runs faster so becomes Winograd's F(2x2, 3x3) (the
// ops of core/ir/ops/winograd.cpp):
//
//   y = conv(x, w, bias)   becomes   u = winograd_weights(w)
//                                    v = winograd_input{padding}(x)           [16, N, TH, TW, C]
//                                    m = matmul(reshape(v, [16, N*TH*TW, C]), u)
//                                    y = winograd_output{size}(reshape(m, [16, N, TH, TW, O])) + bias
//
// The 16 GEMMs do the conv's work with 2.25x fewer multiplies; the transforms are memory-bound
// kernels over 4x the activation. Where the weight is a constant, fold-constants computes u at
// compile time; where it is a parameter (an imported model's weights), u's kernel is kept and runs
// once per set of weights (core/runtime/kept_kernels.h); in a training step it runs every step, a
// small kernel. This is how cuDNN and oneDNN pick Winograd for 3x3 convs; eager ops keep the conv.
// The new nodes keep the conv's provenance, so the debugger maps their kernels to its line.
#include "core/ir/grad_builder.h"
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {
namespace {

// A node's attributes are complete; an empty stride or dilation list is ONNX's default of ones.
bool all_ones(const AttrMap& attrs, const std::string& name) {
  for (int64_t v : attrs.get_ints(name))
    if (v != 1) return false;
  return true;
}

// The convs the transforms cover: 4-d channels-first f32, a static [O, C, 3, 3] weight, static
// channels and spatial sizes, stride and dilation 1, one group.
bool is_winograd_candidate(const Node& n) {
  if (n.kind != OpKind::Conv || is_channels_last(n.attrs)) return false;
  const TensorType& x = n.inputs[0]->type;
  const TensorType& w = n.inputs[1]->type;
  if (x.dtype != DType::F32 || x.rank() != 4 || !is_static(Shape(x.shape.begin() + 1, x.shape.end())) ||
      !is_static(w.shape) || w.shape[2].value() != 3 || w.shape[3].value() != 3)
    return false;
  return n.attrs.get_int("groups") == 1 && all_ones(n.attrs, "stride") && all_ones(n.attrs, "dilation");
}

// The conv's value as the transforms around the 16 GEMMs, its bias added after.
Value* as_winograd(GradBuilder& b, const Node& conv) {
  const Shape& out = conv.output()->type.shape;  // [N, O, OH, OW]
  std::vector<int64_t> padding = conv.attrs.get_ints("padding");
  if (padding.empty()) padding.assign(4, 0);  // ONNX's default
  AttrMap input_attrs, output_attrs;
  input_attrs.set("padding", padding);
  output_attrs.set("size", std::vector<int64_t>{out[2].value(), out[3].value()});
  Value* u = b.op(OpKind::WinogradWeights, {b.input(1)});
  Value* v = b.op(OpKind::WinogradInput, {b.input(0)}, input_attrs);
  const Shape& tiles = v->type.shape;  // [16, N, TH, TW, C]
  Value* rows = b.reshape(v, {tiles[0], tiles[1] * tiles[2] * tiles[3], tiles[4]});
  Value* m = b.op(OpKind::MatMul, {rows, u});
  Value* y = b.op(OpKind::WinogradOutput, {b.reshape(m, {tiles[0], tiles[1], tiles[2], tiles[3], out[1]})},
                  output_attrs);
  if (conv.inputs.size() > 2) y = b.op(OpKind::Add, {y, b.reshape(b.input(2), {out[1], 1, 1})});
  return y;
}

}  // namespace

Pass winograd_pass(std::function<bool(const Node&)> wanted) {
  return rewrite_nodes_pass(
      "winograd", "3x3 stride-1 convs as Winograd F(2x2, 3x3): input and output transforms around 16 GEMMs",
      "convs_rewritten", [wanted = std::move(wanted)](const Node& n) { return is_winograd_candidate(n) && wanted(n); },
      as_winograd);
}

}  // namespace kiln
