// Lowering and emission stages: the schedule's kernels become kernel IR over numbered values, then
// generated source in the backend's dialect.
#include <functional>
#include <set>

#include "core/kernel/emit.h"
#include "core/kernel/kernel_text.h"
#include "core/kernel/lower_group.h"
#include "core/runtime/lowered_program.h"
#include "core/support/error.h"

namespace kiln {
namespace {

// Slots whose every load is at the linear index: a single-store pointwise kernel reads element i of
// them only in the invocation that writes element i, so its output may overwrite them.
std::set<int> elementwise_slots(const kernel::Kernel& k) {
  std::set<int> all, not_linear;
  std::set<const kernel::Expr*> seen;
  std::function<void(const kernel::ExprRef&)> walk = [&](const kernel::ExprRef& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->kind == kernel::ExprKind::Load) {
      all.insert(e->index);
      const kernel::ExprRef& off = e->args[0];
      if (!(off->kind == kernel::ExprKind::Coord && off->index == -1)) not_linear.insert(e->index);
    }
    for (const kernel::ExprRef& a : e->args) walk(a);
  };
  for (const kernel::Store& s : k.stores) walk(s.value);
  std::set<int> out;
  for (int s : all)
    if (!not_linear.count(s)) out.insert(s);
  return out;
}

// A template's input (an anchor input or an epilogue operand): the value it reads, through views
// read in place.
void add_template_input(ProgramKernel& pk, const TemplateOperand& operand, const std::map<const Value*, int>& number) {
  pk.node_inputs.push_back(number.at(operand.source));
  pk.input_views.emplace_back();
  for (const Node* view : operand.views)
    pk.input_views.back().push_back({view->kind, view->attrs, view->output()->type.shape});
}

// In place: a one-store pointwise kernel may write over an intermediate it reads element-wise.
void find_in_place(ProgramKernel& pk, const std::vector<ProgramValue>& values, size_t lowered_outputs) {
  if (pk.steps.size() != 1 || lowered_outputs != 1 ||
      pk.steps[0].kernel.kernel.kind != kernel::KernelKind::Pointwise ||
      values[size_t(pk.writes[0])].storage != ValueStorage::Arena)
    return;
  const TensorType& out = values[size_t(pk.writes[0])].type;
  for (int slot : elementwise_slots(pk.steps[0].kernel.kernel)) {
    const ProgramValue& in = values[size_t(pk.steps[0].args[size_t(slot)])];
    if (in.storage == ValueStorage::Arena && dtype_size(in.type.dtype) == dtype_size(out.dtype) &&
        shape_str(in.type.shape) == shape_str(out.shape)) {
      pk.in_place_output = pk.writes[0];
      pk.in_place_input = pk.steps[0].args[size_t(slot)];
      return;
    }
  }
}

// The intermediate a group of reshapes only reads, when its one result may alias it: a chain of
// reshapes of an intermediate (not a graph input, constant or output: those live in buffers of
// their own), whose last value is its only one read after it and is not returned.
const Value* reshaped_intermediate(const FusionGroup& g, const std::map<const Value*, int>& number,
                                   const std::vector<ProgramValue>& values,
                                   const std::map<const Value*, int>& output_number) {
  if (g.outputs.size() != 1 || g.outputs[0] != g.nodes.back()->output() || output_number.count(g.outputs[0]))
    return nullptr;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i]->kind != OpKind::Reshape || (i > 0 && g.nodes[i]->inputs[0] != g.nodes[i - 1]->output()))
      return nullptr;
  const Value* source = g.nodes[0]->inputs[0];
  auto it = number.find(source);
  if (it == number.end() || values[size_t(it->second)].storage != ValueStorage::Arena) return nullptr;
  return source;
}

PlannedKernel describe_group(const FusionGroup& g, const kernel::LoweredGroup& lowered) {
  PlannedKernel info;
  for (const Node* n : g.nodes) {
    PlannedNode pn{n->id, n->kind, n->attrs, n->provenance, {}, {}};
    for (const Value* v : n->inputs) pn.inputs.push_back(v->id);
    for (const Value* v : n->outputs) pn.outputs.push_back(v->id);
    info.nodes.push_back(std::move(pn));
  }
  for (const Value* v : lowered.inputs) info.reads.push_back(v->id);
  for (const Value* v : lowered.outputs) info.writes.push_back(v->id);
  std::set<int> origins;
  for (const kernel::LoweredOp::Step& s : lowered.op.steps)
    for (int id : s.kernel.kernel.origins()) origins.insert(id);
  info.origins.assign(origins.begin(), origins.end());
  info.name = lowered.op.steps.empty() ? "empty" : lowered.op.steps[0].kernel.kernel.name;
  return info;
}

}  // namespace

LoweredProgram lower_schedule(const Graph& graph, const KernelSchedule& schedule) {
  LoweredProgram program;
  std::map<const Value*, int> number;
  auto add_value = [&](const Value* v, ValueStorage storage, int index) {
    number[v] = int(program.values.size());
    program.values.push_back({v->type, storage, index, "%" + std::to_string(v->id) + " " + v->type.str(), v->id});
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    add_value(graph.inputs()[i], ValueStorage::Input, int(i));
    program.input_types.push_back(graph.inputs()[i]->type);
  }
  std::map<const Value*, int> output_number;
  for (size_t i = 0; i < graph.outputs().size(); ++i) output_number.emplace(graph.outputs()[i], int(i));

  // Constants first: a fused group may read one recorded after the group's first node.
  for (const ScheduledKernel& k : schedule.kernels) {
    if (k.group.kind != FusionKind::Constant) continue;
    const Node* n = k.group.nodes[0];
    add_value(n->output(), ValueStorage::Constant, int(program.constants.size()));
    program.constants.push_back({number.at(n->output()), n->id, n->attrs.get_tensor("value")});
  }
  for (const ScheduledKernel& k : schedule.kernels) {
    const FusionGroup& g = k.group;
    if (g.kind == FusionKind::Constant) continue;
    if (const Value* source = reshaped_intermediate(g, number, program.values, output_number)) {
      const Value* v = g.outputs[0];
      add_value(v, ValueStorage::Arena, -1);
      program.values.back().alias_of = number.at(source);
      program.values.back().name += " (reshape of %" + std::to_string(source->id) + ")";
      continue;
    }
    kernel::LoweredGroup lowered;
    try {
      lowered = kernel::lower_group(g.nodes, g.outputs);
    } catch (const Error& e) {
      const Node* n = g.nodes[0];
      std::vector<TensorType> types;
      for (const Value* v : n->inputs) types.push_back(v->type);
      throw Error(op_error(n->kind, types, n->provenance, e.what()));
    }
    ProgramKernel pk;
    for (const Value* v : lowered.inputs) pk.reads.push_back(number.at(v));
    for (const Value* v : lowered.outputs) {
      auto out = output_number.find(v);
      if (out != output_number.end() && !number.count(v)) add_value(v, ValueStorage::Output, out->second);
      else if (!number.count(v)) add_value(v, ValueStorage::Arena, -1);
      pk.writes.push_back(number.at(v));
    }
    std::vector<int> temps;
    for (const TensorType& t : lowered.op.temps) {
      temps.push_back(int(program.values.size()));
      program.values.push_back({t, ValueStorage::Arena, -1, "scratch of " + lowered.op.steps[0].kernel.kernel.name});
    }
    program.kernel_info.push_back(describe_group(g, lowered));
    for (kernel::LoweredOp::Step& s : lowered.op.steps) {
      ProgramStep step;
      for (int a : s.args) {
        size_t i = size_t(a);
        if (i < pk.reads.size()) step.args.push_back(pk.reads[i]);
        else if (i < pk.reads.size() + pk.writes.size()) step.args.push_back(pk.writes[i - pk.reads.size()]);
        else step.args.push_back(temps.at(i - pk.reads.size() - pk.writes.size()));
      }
      step.kernel = std::move(s.kernel);
      pk.steps.push_back(std::move(step));
    }
    for (int t : temps) pk.writes.push_back(t);
    if (k.template_candidate) {
      const Node* anchor = g.nodes[g.anchor];
      pk.template_op = std::make_pair(anchor->kind, anchor->attrs);
      for (size_t i = 0; i < anchor->inputs.size(); ++i) {
        add_template_input(pk, template_operand(g, anchor->inputs[i]), number);
      }
      for (const ChainStep& c : template_chain(*anchor, std::span(g.nodes).subspan(g.anchor + 1))) {
        pk.template_epilogue.push_back(
            {c.node->kind, c.node->attrs, c.operand ? int(pk.node_inputs.size()) : -1, c.operand_first});
        if (c.operand) add_template_input(pk, template_operand(g, c.operand), number);
      }
      for (const Value* v : g.nodes.back()->outputs) pk.node_outputs.push_back(number.at(v));
    }
    find_in_place(pk, program.values, lowered.outputs.size());
    program.kernels.push_back(std::move(pk));
  }
  for (const Value* v : graph.outputs())
    if (!number.count(v)) add_value(v, ValueStorage::Output, output_number.at(v));  // unreachable for valid graphs
  for (const Value* v : graph.outputs()) program.output_values.push_back(number.at(v));
  program.graph_nodes = int64_t(graph.num_nodes());
  return program;
}

std::string print_lowered_program(const LoweredProgram& program) {
  std::map<int, std::string> node_text;  // node id -> "%3 relu"
  for (const PlannedKernel& info : program.kernel_info)
    for (const PlannedNode& n : info.nodes)
      node_text[n.id] = (n.outputs.empty() ? "" : "%" + std::to_string(n.outputs[0]) + " ") + std::string(op_name(n.kind));
  auto describe = [&node_text](int id) {
    auto it = node_text.find(id);
    return it == node_text.end() ? "node " + std::to_string(id) : it->second;
  };
  std::string out;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const ProgramKernel& pk = program.kernels[k];
    out += "// kernel " + std::to_string(k) + " '" + program.kernel_info[k].name + "': " +
           std::to_string(pk.steps.size()) + (pk.steps.size() == 1 ? " step" : " steps") +
           (pk.template_op ? ", template candidate" : "") + "\n";
    for (const ProgramStep& s : pk.steps) {
      std::string args;
      for (int a : s.args) args += (args.empty() ? "" : ", ") + program.values[size_t(a)].name;
      out += "// binds " + args + "\n" + kernel::print_kernel(s.kernel, describe);
    }
    out += "\n";
  }
  return out;
}

void emit_program(LoweredProgram& program, const kernel::CodegenTarget& target) {
  // CUDA: where each node was recorded in user code, for #line directives.
  std::map<int, kernel::SourceLine> source_lines;
  for (const PlannedKernel& info : program.kernel_info)
    for (const PlannedNode& n : info.nodes)
      if (!n.provenance.empty() && n.provenance.origins.front().imported.empty())
        source_lines[n.id] = {n.provenance.origins.front().file, int(n.provenance.origins.front().line)};
  kernel::EmitOptions options = kernel::emit_options_for(target);
  if (target.dialect == kernel::Dialect::Cuda)
    options.source_line = [&source_lines](int id) {
      auto it = source_lines.find(id);
      return it == source_lines.end() ? kernel::SourceLine{} : it->second;
    };
  program.language = kernel::language_of(target.dialect);
  for (ProgramKernel& pk : program.kernels) {
    for (ProgramStep& s : pk.steps) {
      // C++ prints static sizes as literals; GPU dialects read them to choose a reduction's form.
      options.static_params = s.kernel.static_param_values();
      emit_step(s, options);
    }
  }
}

void emit_step(ProgramStep& step, const kernel::EmitOptions& options) {
  kernel::EmittedKernel emitted = kernel::emit(step.kernel.kernel, options);
  step.source = std::move(emitted.source);
  step.line_origins = std::move(emitted.line_origins);
  step.workgroup_size = emitted.workgroup_size;
  step.elements_per_invocation = emitted.elements_per_invocation;
  step.invocations_per_element = emitted.invocations_per_element;
}

std::string print_sources(const LoweredProgram& program) {
  std::string out;
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (size_t i = 0; i < program.kernels[k].steps.size(); ++i)
      out += "// ---- kernel " + std::to_string(k) + " step " + std::to_string(i) + ": " +
             program.kernels[k].steps[i].kernel.kernel.name + " (" + program.language + ")\n" +
             program.kernels[k].steps[i].source + "\n";
  return out;
}

}  // namespace kiln
