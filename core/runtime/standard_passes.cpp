// The standard pass list, the pass registry, and fold-constants' evaluator: the reference kernels.
#include "core/runtime/standard_passes.h"

#include "core/autodiff/reverse.h"
#include "core/passes/passes.h"
#include "core/runtime/execute_op.h"
#include "core/support/error.h"

namespace kiln {
namespace {

// One node on ref, its inputs uploaded from the literals and its results read back.
std::vector<std::shared_ptr<const Literal>> evaluate_on_ref(const Node& node,
                                                            const std::vector<const Literal*>& inputs) {
  std::vector<DeviceTensor> args;
  for (const Literal* lit : inputs)
    args.push_back(
        DeviceTensor::upload({lit->dtype, make_shape(lit->shape)}, lit->bytes.data(), Device::ref()));
  std::vector<std::shared_ptr<const Literal>> results;
  for (const DeviceTensor& t : execute_op(node.kind, args, node.attrs, node.provenance)) {
    auto lit = std::make_shared<Literal>();
    lit->dtype = t.type.dtype;
    lit->shape = t.sizes();
    lit->bytes.resize(t.bytes());
    if (!lit->bytes.empty()) t.device.backend().download(*t.buffer, lit->bytes.data(), lit->bytes.size());
    results.push_back(std::move(lit));
  }
  return results;
}

Pass fold_constants_on_ref() { return fold_constants_pass(evaluate_on_ref); }

}  // namespace

std::vector<Pass> standard_pipeline() {
  return {
      infer_shapes_pass(),      // types first: every later pass trusts them
      fold_constants_on_ref(),  // constant subgraphs become literals the next passes can match
      simplify_pass(),          // x*1, neg(neg(x)), view chains: exposes more duplicates to cse
      cse_pass(),               // merge duplicates into their first occurrence
      raise_patterns_pass(),    // decomposed layer norms and softmaxes become one op each
      dce_pass(),               // delete what simplify, cse and raise-patterns left unread
      // compile_graph (compile_graph.cpp) goes on from here for a device: fusion, lowering,
      // emission, backend compile and memory planning.
  };
}

std::vector<Pass> registered_passes() {
  // channels-last, expand-ops, winograd and conv-as-matmul by name take every candidate;
  // compile_graph asks the device's backend instead.
  return {infer_shapes_pass(), fold_constants_on_ref(), simplify_pass(), cse_pass(),
          raise_patterns_pass(), dce_pass(), autodiff_pass(),
          channels_last_pass([](const Node&) { return true; }), expand_ops_pass([](const Node&) { return false; }),
          winograd_pass([](const Node&) { return true; }), conv_as_matmul_pass([](const Node&) { return true; })};
}

Pass find_pass(std::string_view name) {
  std::string known;
  for (Pass& p : registered_passes()) {
    if (p.name == name) return std::move(p);
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error("unknown pass '" + std::string(name) + "'; known passes: " + known);
}

std::vector<Pass> parse_pass_list(std::string_view names) {
  std::vector<Pass> out;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    std::string_view item = names.substr(start, comma == std::string_view::npos ? comma : comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.push_back(find_pass(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace kiln
