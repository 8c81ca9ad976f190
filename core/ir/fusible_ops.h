// What each op is to fusion: the node classes the fusion pass groups by (core/passes/fusion.cpp)
// and the group lowering rebuilds into one kernel (core/kernel/lower_group.cpp), defined once so
// the two agree.
#pragma once

#include "core/ir/graph.h"

namespace kiln {

// Element i of the output from element i of each (broadcast) input: unary and binary pointwise
// ops, and rand_uniform, whose element i is element i of its stream.
inline bool is_elementwise(const Node& node) {
  const OpFamily family = op_def(node.kind).family;
  return (family == OpFamily::Unary || family == OpFamily::Binary || node.kind == OpKind::RandUniform) &&
         node.outputs.size() == 1;
}

// reshape, permute, expand, slice, pad and index_select: one load through an index map (pad's
// guarded by its bounds, index_select's reading the index first), so they can join a chain.
inline bool is_index_view(const Node& node) {
  switch (node.kind) {
    case OpKind::Reshape: case OpKind::Permute: case OpKind::Expand: case OpKind::Slice: case OpKind::Pad:
      return node.inputs.size() == 1 && node.outputs.size() == 1;
    case OpKind::IndexSelect:
      return node.inputs.size() == 2 && node.outputs.size() == 1;
    default:
      return false;
  }
}

// A reduction one Reduce kernel computes, taking pointwise producers and consumers.
inline bool is_plain_reduction(const Node& node) {
  switch (node.kind) {
    case OpKind::Sum: case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::Prod:
      return node.inputs.size() == 1 && node.outputs.size() == 1;
    default:
      return false;
  }
}

// An op whose kernel supplies the loop and can take pointwise consumers in its epilogue: a plain
// reduction, a matmul-like op or a conv or pool. max_pool_grad lowers to two kernels: none.
inline bool is_epilogue_anchor(const Node& node) {
  const OpFamily family = op_def(node.kind).family;
  return is_plain_reduction(node) || ((family == OpFamily::Linalg || family == OpFamily::Conv) &&
                                      node.outputs.size() == 1 && node.kind != OpKind::MaxPoolGrad);
}

}  // namespace kiln
