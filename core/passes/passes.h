// The standard cleanup passes, each made by one factory; pipeline.cpp lists them in order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/passes/pass.h"

namespace kiln {

// "infer-shapes": recomputes every node's output types with the op's shape rule.
Pass infer_shapes_pass();
// "fold-constants": evaluates nodes whose inputs are all constants on the cpu reference and
// replaces them by constants, when every output has at most max_elements elements.
Pass fold_constants_pass(int64_t max_elements = 65536);
// "cse": merges nodes with the same op, attributes and inputs into the first of them.
Pass cse_pass();
// "simplify": algebraic identities (x+0, x*1, neg(neg(x)), reshape/permute chains, ...).
Pass simplify_pass();
// "raise-patterns": rewrites decomposed layer norms and softmaxes (as ONNX exports them) into the
// layer_norm and softmax ops, merging the replaced nodes' provenance into the new node.
Pass raise_patterns_pass();
// "dce": removes nodes whose results nobody reads.
Pass dce_pass();

// Every pass kiln knows, for lookup by name (tests, tools, KILN_PASSES-style overrides).
std::vector<Pass> registered_passes();
// The pass with this name; throws kiln::Error listing the known names.
Pass find_pass(std::string_view name);
// "fold-constants,cse,dce" -> those passes in that order.
std::vector<Pass> parse_pass_list(std::string_view names);

}  // namespace kiln
