// Fusion: decides which graph nodes run as one kernel. Pointwise nodes of one iteration shape form
// one group (their intermediates never reach memory), and view ops (reshape, permute, expand,
// slice, pad) of a group's values join it as index maps, as do views of other values that only
// one group reads (where the target reads through views); a sum/mean/max/min/prod reduction joins
// the pointwise group that produces its input when nothing else reads that group's values; pointwise
// consumers of a reduction, matmul, gemm, linear, conv or pool on its output shape run in its
// epilogue, and a chain of them in the epilogue of the backend's template where it takes them;
// views in front of a matmul join its template's group where the template reads them in place.
// Everything else is a group of one.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/ir/fusible_ops.h"
#include "core/ir/graph.h"

namespace kiln {

enum class FusionKind {
  Pointwise,  // unary/binary nodes of one output shape, and view ops between them
  Reduce,     // a reduction, possibly with pointwise producers in its loop and consumers after it
  Epilogue,   // a matmul/gemm/linear/conv/pool with pointwise consumers in its epilogue
  Single,     // one node lowered on its own (matmul, conv, data movement, ...)
  Constant,   // a literal: uploaded once, no kernel
};

struct FusionGroup {
  FusionKind kind = FusionKind::Single;
  std::vector<const Node*> nodes;     // in the graph's topological order
  std::vector<const Value*> outputs;  // values read after the group (or graph outputs, or unread)
  std::vector<int> origins() const;   // ids of every node in the group
  // Its node `anchor` is kept alone for the backend's template (FusionOptions::keep_alone); any
  // nodes after it are the epilogue that template takes (FusionOptions::template_epilogue), any
  // before it the views it reads in place (FusionOptions::template_views).
  bool template_anchor = false;
  size_t anchor = 0;
};

struct FusionOptions {
  bool fuse = true;              // false: every node is its own group (the eager baseline)
  bool fuse_reductions = true;   // pointwise producers into a reduction's loop
  bool fuse_epilogues = true;    // pointwise consumers into a reduction/matmul/conv epilogue
  bool fuse_views = true;        // reshape/permute/expand/slice/pad of a group's values join it
  // Views scheduled as a kernel of their own, of at most this many elements (at the traced sizes),
  // move into the one kernel that reads them, which reads through their index maps instead of a
  // copy (CodegenTarget::read_through_views_up_to). 0: none move.
  int64_t inline_views_up_to = INT64_MAX;
  // A group closes at this many nodes. A kernel's expressions nest as deep as its chain, and the
  // lowering, printing and evaluation of kernel IR recurse over them: without a bound, a chain of
  // 50,000 pointwise nodes overflows the stack. (TVM bounds fusion depth at 256 the same way.)
  size_t max_group_nodes = 256;
  // A group closes before its kernel would bind more buffers than this (values read from outside
  // it, and its values read after it): the device's per-stage storage-buffer limit (Vulkan 1.2
  // guarantees 4; some mobile GPUs have 8).
  size_t max_group_buffers = SIZE_MAX;
  // Anchors that run faster alone, as the backend's tuned template, than as a generic kernel with
  // the epilogue folded in: they take no epilogue. Unset: every anchor takes one.
  std::function<bool(const Node&)> keep_alone;
  // Whether the template of an anchor kept alone also takes `epilogue`: pointwise nodes of its
  // output shape, each reading the one before it (the first reads the anchor) as the only reader
  // of that value, plus at most one operand from outside the group. Unset: no epilogue.
  std::function<bool(const Node& anchor, const std::vector<const Node*>& epilogue)> template_epilogue;
  // Whether that template (with `epilogue`) reads these views of its operands in place, through
  // strides: per anchor input, then per epilogue operand (template_chain's order), the chain of
  // reshape/permute/expand/slice nodes from a value to it, empty where it is read as it is. Views
  // so taken, read by nothing else, join the template's group and write no copy. Unset: views
  // before a template are copies.
  std::function<bool(const Node& anchor, const std::vector<const Node*>& epilogue,
                     const std::vector<std::vector<const Node*>>& views)>
      template_views;
};

// Groups in execution order; every node of `graph` is in exactly one group, and every group comes
// after the groups producing its inputs.
std::vector<FusionGroup> fuse_graph(const Graph& graph, const FusionOptions& options = {});

// A value a template group's anchor or epilogue reads (an anchor input, an epilogue operand), read
// through the views in front of the anchor: the value those views start from, and the views in
// order (none where it is read as it is).
struct TemplateOperand {
  const Value* source = nullptr;
  std::vector<const Node*> views;
};
TemplateOperand template_operand(const FusionGroup& group, const Value* read);

// One node of a template's epilogue chain, with its operand from outside the chain (nullptr for a
// unary node) and whether that operand comes first (sub(c, v) rather than sub(v, c)).
struct ChainStep {
  const Node* node = nullptr;
  const Value* operand = nullptr;
  bool operand_first = false;
};
// The chain after `anchor`: each node of `epilogue` reads the value before it.
std::vector<ChainStep> template_chain(const Node& anchor, std::span<const Node* const> epilogue);

// "3 kernels: [add,mul,relu] [matmul] [exp]" for logs and test failures.
std::string describe_groups(const std::vector<FusionGroup>& groups);

}  // namespace kiln
