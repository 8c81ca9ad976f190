// conv-as-matmul: a conv the backend runs faster so becomes its input's columns and one matmul
// per image (core/ir/ops/im2col.h):
//
//   y = conv(x, w, bias)   becomes   cols = index_select(x padded, [N, C, plane], constant index)
//                                    y = reshape(matmul(w as [Co, C * taps], cols as [N, C * taps, pixels]))
//                                        + bias
//
// For shapes a direct conv runs poorly: a first conv's few input channels, which its kernels cannot
// read four at a time. The columns cost one gather (taps x the input's bytes); the matmul template
// does the multiplies at its own speed, bias in its epilogue. As cuDNN's and oneDNN's GEMM-based
// algorithms; eager ops keep the conv. The new nodes keep the conv's provenance.
#include "core/ir/grad_builder.h"
#include "core/ir/ops/conv_window.h"
#include "core/ir/ops/im2col.h"
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {
namespace {

// Channels-first float convs with one group, every size a number.
bool is_candidate(const Node& n) {
  if (n.kind != OpKind::Conv || is_channels_last(n.attrs)) return false;
  const TensorType& x = n.inputs[0]->type;
  return is_floating(x.dtype) && x.rank() >= 3 && is_static(x.shape) && is_static(n.inputs[1]->type.shape) &&
         is_static(n.outputs[0]->type.shape) && n.attrs.get_int("groups") == 1;
}

}  // namespace

Pass conv_as_matmul_pass(std::function<bool(const Node&)> wanted) {
  return rewrite_nodes_pass(
      "conv-as-matmul", "convs the backend runs faster as a gather of columns (im2col) and one matmul per image",
      "convs_rewritten", [wanted = std::move(wanted)](const Node& n) { return is_candidate(n) && wanted(n); },
      [](GradBuilder& b, const Node& conv) {  // nullptr where im2col declines, before building anything
        const ops::Window w = ops::window(b, ops::spatial_of(b, b.input(1), "weight"));
        return ops::conv_as_matmul(b, b.input(0), b.input(1), conv.inputs.size() > 2 ? b.input(2) : nullptr, w);
      });
}

}  // namespace kiln
