// schedule_kernels: fusion with the backend's template choices, and the schedule's text form.
#include "core/runtime/schedule.h"

#include <set>

#include "core/ir/strided_view.h"

namespace kiln {
namespace {

const char* kind_text(FusionKind kind) {
  switch (kind) {
    case FusionKind::Pointwise: return "pointwise";
    case FusionKind::Reduce: return "reduce";
    case FusionKind::Epilogue: return "epilogue";
    case FusionKind::Single: return "single";
    case FusionKind::Constant: return "constant";
  }
  return "?";
}

}  // namespace

BufferView at_hints(const Value* v) {
  std::vector<int64_t> dims;
  for (const SymInt& d : v->type.shape) dims.push_back(d.is_static() ? d.value() : d.hint());
  return BufferView{nullptr, v->type.dtype, dims};
}

ViewsAtHints::ViewsAtHints(const Node& n) {
  for (const Value* v : n.inputs) inputs.push_back(at_hints(v));
  for (const Value* v : n.outputs) outputs.push_back(at_hints(v));
}

namespace {

// The layout `views` read their source with at its traced sizes.
std::optional<StridedLayout> strides_at_hints(const std::vector<const Node*>& views) {
  std::vector<ViewStep> steps;
  for (const Node* n : views) steps.push_back({n->kind, &n->attrs, at_hints(n->output()).dims});
  return strides_through_views(at_hints(views.front()->inputs[0]).dims, steps);
}

// Whether the backend has a template for `anchor` (one output) with `epilogue` at the traced sizes,
// each input read through its views (none given: as it is).
bool template_serves(Backend& backend, bool max_autotune, const Node& anchor, const std::vector<const Node*>& epilogue,
                     const std::vector<std::vector<const Node*>>& views = {}) {
  std::vector<BufferView> ins, outs{at_hints(epilogue.empty() ? anchor.output() : epilogue.back()->output())};
  for (size_t i = 0; i < anchor.inputs.size(); ++i) {
    ins.push_back(at_hints(anchor.inputs[i]));
    if (i >= views.size() || views[i].empty()) continue;
    std::optional<StridedLayout> layout = strides_at_hints(views[i]);
    if (!layout) return false;
    ins.back().strides = std::move(layout->strides);
    ins.back().offset = layout->offset;
  }
  std::vector<EpilogueStep> steps;
  for (const ChainStep& c : template_chain(anchor, epilogue)) {
    steps.push_back({c.node->kind, &c.node->attrs, c.operand ? int(ins.size()) : -1, c.operand_first});
    if (!c.operand) continue;
    ins.push_back(at_hints(c.operand));
    const size_t at = ins.size() - 1;  // views run parallel to the template's inputs
    if (at >= views.size() || views[at].empty()) continue;
    // An epilogue operand is read in place only where its elements lie as they are, from an offset.
    std::optional<StridedLayout> layout = strides_at_hints(views[at]);
    if (!layout || !is_row_major(ins.back().dims, layout->strides)) return false;
    ins.back().offset = layout->offset;
  }
  const OpRun run{anchor.kind, anchor.attrs, ins, outs, max_autotune};
  return (steps.empty() ? backend.plan_template(run) : backend.plan_fused_template(run, steps)).has_value();
}

}  // namespace

KernelSchedule schedule_kernels(const Graph& graph, Backend& backend, bool fuse, bool max_autotune,
                                bool template_views) {
  FusionOptions fusion;
  fusion.fuse = fuse;
  if (std::optional<kernel::CodegenTarget> target = backend.codegen()) {
    fusion.max_group_buffers = size_t(std::max(1, std::min(target->max_buffers, target->max_storage_buffers)));
    fusion.inline_views_up_to = target->read_through_views_up_to;
  }
  fusion.keep_alone = [&backend, max_autotune](const Node& n) {
    return backend.has_template(n.kind) && template_serves(backend, max_autotune, n, {});
  };
  fusion.template_epilogue = [&backend, max_autotune](const Node& anchor, const std::vector<const Node*>& epilogue) {
    return template_serves(backend, max_autotune, anchor, epilogue);
  };
  // Only a matmul's template reads strided operands (decode_matmul): a transpose, a head split, a
  // piece of a packed projection; and, where the backend takes an operand from an offset, its
  // epilogue's operands (a slice of a projection, as they lie).
  if (template_views)
    fusion.template_views = [&backend, max_autotune](const Node& anchor, const std::vector<const Node*>& epilogue,
                                                     const std::vector<std::vector<const Node*>>& views) {
      return anchor.kind == OpKind::MatMul && template_serves(backend, max_autotune, anchor, epilogue, views);
    };
  KernelSchedule schedule;
  for (FusionGroup& g : fuse_graph(graph, fusion)) {
    bool candidate = g.kind != FusionKind::Constant &&
                     (g.template_anchor || (g.nodes.size() == 1 && backend.has_template(g.nodes[0]->kind)));
    schedule.kernels.push_back({std::move(g), candidate});
  }
  return schedule;
}

std::string print_schedule(const KernelSchedule& schedule) {
  std::string out;
  int index = 0;
  for (const ScheduledKernel& k : schedule.kernels) {
    const FusionGroup& g = k.group;
    if (g.kind == FusionKind::Constant) {
      out += "constant %" + std::to_string(g.nodes[0]->output()->id) + "\n";
      continue;
    }
    std::string line = "kernel " + std::to_string(index++) + " " + kind_text(g.kind);
    if (k.template_candidate) line += " template?";
    line += " [";
    std::set<const Value*> made;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node* n = g.nodes[i];
      line += (i ? ", %" : "%") + std::to_string(n->outputs.empty() ? -1 : n->outputs[0]->id) + " " +
              std::string(op_name(n->kind));
      for (const Value* v : n->outputs) made.insert(v);
    }
    line += "] reads";
    std::set<const Value*> read;
    for (const Node* n : g.nodes)
      for (const Value* v : n->inputs)
        if (!made.count(v) && read.insert(v).second) line += " %" + std::to_string(v->id);
    line += " writes";
    for (const Value* v : g.outputs) line += " %" + std::to_string(v->id);
    out += line + "\n";
  }
  return out;
}

}  // namespace kiln
