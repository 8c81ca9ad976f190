// conv-as-matmul: a conv the backend runs faster so becomes its input's columns and one matmul
// per image (core/ir/ops/im2col.h):
//
//   y = conv(x, w, bias)   becomes   cols = index_select(channels-last x, constant taps index)
//                                    y = reshape(matmul(w as [Co, taps * C], transpose(cols[n]))) + bias
//
// For shapes a direct conv runs poorly: a first conv's few input channels, which its kernels cannot
// read four at a time, or small images whose windows give a direct kernel little to share. The
// columns cost one gather (taps x the input's bytes); the matmul template does the multiplies at
// its own speed, bias in its epilogue. As cuDNN's and oneDNN's GEMM-based algorithms; eager ops
// keep the conv. The new nodes keep the conv's provenance.
#include "core/ir/grad_builder.h"
#include "core/ir/ops/conv_window.h"
#include "core/ir/ops/im2col.h"
#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {
namespace {

// Channels-first float convs with one group, every size a number.
bool is_candidate(const Node& n) {
  if (n.kind != OpKind::Conv || n.outputs.size() != 1 || is_channels_last(n.attrs)) return false;
  const TensorType& x = n.inputs[0]->type;
  return is_floating(x.dtype) && x.rank() >= 3 && is_static(x.shape) && is_static(n.inputs[1]->type.shape) &&
         is_static(n.outputs[0]->type.shape) && n.attrs.get_int("groups") == 1;
}

}  // namespace

Pass conv_as_matmul_pass(std::function<bool(const Node&)> wanted) {
  return {"conv-as-matmul", "convs the backend runs faster as a gather of columns (im2col) and one matmul per image",
          [wanted = std::move(wanted)](Graph& graph) {
            Replacements replacements;
            for (Node* conv : graph.nodes()) {
              if (!is_candidate(*conv) || !wanted(*conv)) continue;
              const size_t before = graph.num_nodes();
              GradBuilder b = GradBuilder::expanding(graph, *conv);
              const ops::Window w = ops::window(b, ops::spatial_of(b, b.input(1), "weight"));
              Value* y = ops::conv_as_matmul(b, b.input(0), b.input(1), conv->inputs.size() > 2 ? b.input(2) : nullptr,
                                             w, 1);
              if (!y) continue;  // im2col declined before building anything
              replacements.appended_since(graph, before, *conv);
              replacements.values[conv->output()] = y;
            }
            PassStats stats;
            stats.counters["convs_rewritten"] = int64_t(replacements.values.size());
            if (!replacements.values.empty()) stats.counters["nodes_removed"] = replacements.apply(graph);
            return stats;
          }};
}

}  // namespace kiln
