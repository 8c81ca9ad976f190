// The standard cleanup passes, each made by one factory; core/runtime/standard_passes.cpp lists
// them in order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/passes/pass.h"

namespace kiln {

// "infer-shapes": recomputes every node's output types with the op's shape rule.
Pass infer_shapes_pass();
// Runs one node on constant inputs (its attributes already static) and returns its results;
// throws kiln::Error when it cannot (a kernel that fails, an op it lacks).
using ConstantEvaluator = std::function<std::vector<std::shared_ptr<const Literal>>(
    const Node& node, const std::vector<const Literal*>& inputs)>;
// "fold-constants": evaluates nodes whose inputs are all constants with `evaluate` and replaces
// them by constants, when every output has at most max_elements elements.
Pass fold_constants_pass(ConstantEvaluator evaluate, int64_t max_elements = 65536);
// "cse": merges nodes with the same op, attributes and inputs into the first of them.
Pass cse_pass();
// "simplify": algebraic identities (x+0, x*1, neg(neg(x)), reshape/permute chains, ...).
Pass simplify_pass();
// "raise-patterns": rewrites decomposed layer norms and softmaxes (as ONNX exports them) into the
// layer_norm and softmax ops, merging the replaced nodes' provenance into the new node.
Pass raise_patterns_pass();
// "dce": removes nodes whose results nobody reads.
Pass dce_pass();
// "expand-ops": each node whose op has an expansion (OpDef::expand) and that `keep` declines
// becomes its expansion: for backends that run a few ops' expansions faster than the ops
// themselves (core/passes/expand_ops.cpp).
Pass expand_ops_pass(std::function<bool(const Node&)> keep);
// "channels-last": the 4-d convs and window pools `wanted` picks run on channels-last activations
// (their channels_last attribute) between permutes, and the permutes between such ops cancel
// (core/passes/channels_last.cpp). For backends whose kernels prefer that layout; runs after
// autodiff, whose rules read channels-first activations.
Pass channels_last_pass(std::function<bool(const Node&)> wanted);
// "winograd": the 3x3 stride-1 f32 convs (channels-first, one group, static channels and spatial
// sizes) `wanted` picks become Winograd F(2x2, 3x3): a weight transform, an input transform, 16
// GEMMs and an output transform (core/passes/winograd.cpp). For backends whose GEMMs outrun their
// direct convs; runs after autodiff and expand-ops.
Pass winograd_pass(std::function<bool(const Node&)> wanted);
// "conv-as-matmul": the convs `wanted` picks (one group, channels-first, static sizes) become their
// input's columns, gathered by one index_select, and one matmul per image
// (core/passes/conv_as_matmul.cpp). For backends whose matmul outruns their conv at some shapes;
// runs after autodiff, expand-ops and winograd.
Pass conv_as_matmul_pass(std::function<bool(const Node&)> wanted);

}  // namespace kiln
