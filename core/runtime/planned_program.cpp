// PlannedProgram: fuse -> lower groups -> compile once; per set of input shapes: memory plan,
// arenas, push constants (and a recording with reduce_overhead); per run: launches or one replay.
#include "core/runtime/planned_program.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/kernel/emit.h"
#include "core/kernel/lower_group.h"
#include "core/passes/fusion.h"
#include "core/runtime/checked.h"
#include "core/support/error.h"
#include "core/support/log.h"

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

std::vector<int64_t> concrete(const Shape& shape, const std::map<std::string, int64_t>& bindings) {
  std::vector<int64_t> dims;
  for (const SymInt& d : shape) dims.push_back(d.is_static() ? d.value() : d.evaluate(bindings));
  return dims;
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Ops a backend may serve with a tuned template in place of their generic kernels when they run alone:
// matmul/linear/gemm, conv, and the row ops (softmax, layer_norm, reductions over the innermost axes).
bool template_candidate(OpKind kind) {
  switch (kind) {
    case OpKind::MatMul: case OpKind::Linear: case OpKind::Gemm: case OpKind::Conv:
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNorm: case OpKind::Sum:
    case OpKind::Mean: case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::Prod:
      return true;
    default:
      return false;
  }
}

std::vector<uint8_t> push_bytes(const std::vector<int32_t>& params) {
  std::vector<uint8_t> bytes(params.size() * sizeof(int32_t));
  if (!params.empty()) std::memcpy(bytes.data(), params.data(), bytes.size());
  return bytes;
}

}  // namespace

PlannedProgram::~PlannedProgram() {
  if (stream_) stream_->sync();
}

PlannedProgram::PlannedProgram(const Graph& graph, Device device, const ProgramOptions& options)
    : device_(device), backend_(device.backend()), options_(options) {
  std::map<const Value*, int> number;
  auto add_value = [&](const Value* v, Storage storage, int index) {
    number[v] = int(values_.size());
    values_.push_back({v->type, storage, index, "%" + std::to_string(v->id) + " " + v->type.str(), v->id});
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    add_value(graph.inputs()[i], Storage::Input, int(i));
    input_types_.push_back(graph.inputs()[i]->type);
  }
  std::map<const Value*, int> output_number;
  for (size_t i = 0; i < graph.outputs().size(); ++i) output_number.emplace(graph.outputs()[i], int(i));

  FusionOptions fusion;
  fusion.fuse = options.fuse;
  // An op the backend has a template for runs alone, as the template: on lavapipe the matmul
  // template beats the generic kernel with the epilogue folded in (docs/passes.md, "Fusion").
  fusion.keep_alone = [this](const Node& n) {
    if (!template_candidate(n.kind)) return false;
    auto at_hints = [](const Value* v) {
      std::vector<int64_t> dims;
      for (const SymInt& d : v->type.shape) dims.push_back(d.is_static() ? d.value() : d.hint());
      return BufferView{nullptr, v->type.dtype, dims};
    };
    std::vector<BufferView> ins, outs;
    for (const Value* v : n.inputs) ins.push_back(at_hints(v));
    for (const Value* v : n.outputs) outs.push_back(at_hints(v));
    return backend_.plan_template(OpRun{n.kind, n.attrs, ins, outs}).has_value();
  };
  std::vector<FusionGroup> groups = fuse_graph(graph, fusion);
  // Constants first: a fused group may read one recorded after the group's first node.
  for (const FusionGroup& g : groups) {
    if (g.kind != FusionKind::Constant) continue;
    const Node* n = g.nodes[0];
    const Literal& lit = n->attrs.get_tensor("value");
    constants_.push_back(backend_.alloc(std::max<size_t>(lit.bytes.size(), 4)));
    if (!lit.bytes.empty()) backend_.upload(*constants_.back(), lit.bytes.data(), lit.bytes.size());
    add_value(n->output(), Storage::Constant, int(constants_.size()) - 1);
    constant_nodes_.push_back(n->id);
  }
  for (const FusionGroup& g : groups) {
    if (g.kind == FusionKind::Constant) continue;
    kernel::LoweredGroup lowered;
    try {
      lowered = kernel::lower_group(g.nodes, g.outputs);
    } catch (const Error& e) {
      const Node* n = g.nodes[0];
      std::vector<TensorType> types;
      for (const Value* v : n->inputs) types.push_back(v->type);
      throw Error(op_error(n->kind, types, n->provenance, e.what()));
    }
    KernelSteps ks;
    for (const Value* v : lowered.inputs) ks.reads.push_back(number.at(v));
    for (const Value* v : lowered.outputs) {
      auto out = output_number.find(v);
      if (out != output_number.end() && !number.count(v)) add_value(v, Storage::Output, out->second);
      else if (!number.count(v)) add_value(v, Storage::Arena, -1);
      ks.writes.push_back(number.at(v));
    }
    std::vector<int> temps;
    for (const TensorType& t : lowered.op.temps) {
      temps.push_back(int(values_.size()));
      values_.push_back({t, Storage::Arena, -1, "scratch of " + lowered.op.steps[0].kernel.kernel.name});
    }
    PlannedKernel info;
    for (const Node* n : g.nodes) {
      PlannedNode pn{n->id, n->kind, n->attrs, n->provenance, {}, {}};
      if (!n->provenance.empty() && n->provenance.origins.front().imported.empty())
        source_lines_[n->id] = {n->provenance.origins.front().file, int(n->provenance.origins.front().line)};
      for (const Value* v : n->inputs) pn.inputs.push_back(v->id);
      for (const Value* v : n->outputs) pn.outputs.push_back(v->id);
      info.nodes.push_back(std::move(pn));
    }
    for (const Value* v : lowered.inputs) info.reads.push_back(v->id);
    for (const Value* v : lowered.outputs) info.writes.push_back(v->id);
    std::set<int> origins;
    for (kernel::LoweredOp::Step& s : lowered.op.steps) {
      Step step;
      for (int a : s.args) {
        size_t i = size_t(a);
        if (i < ks.reads.size()) step.args.push_back(ks.reads[i]);
        else if (i < ks.reads.size() + ks.writes.size()) step.args.push_back(ks.writes[i - ks.reads.size()]);
        else step.args.push_back(temps.at(i - ks.reads.size() - ks.writes.size()));
      }
      std::string source;
      step.program = &program_for(s.kernel, &source, &step.line_origins);
      for (int id : s.kernel.kernel.origins()) origins.insert(id);
      info.sources.push_back(std::move(source));
      step.kernel = std::move(s.kernel);
      ks.steps.push_back(std::move(step));
    }
    for (int t : temps) ks.writes.push_back(t);
    if (g.nodes.size() == 1 && template_candidate(g.nodes[0]->kind)) {
      ks.template_op = std::make_pair(g.nodes[0]->kind, g.nodes[0]->attrs);
      for (const Value* v : g.nodes[0]->inputs) ks.node_inputs.push_back(number.at(v));
      for (const Value* v : g.nodes[0]->outputs) ks.node_outputs.push_back(number.at(v));
    }
    // In place: a one-store pointwise kernel may write over an intermediate it reads element-wise.
    if (ks.steps.size() == 1 && lowered.outputs.size() == 1 &&
        ks.steps[0].kernel.kernel.kind == kernel::KernelKind::Pointwise &&
        values_[size_t(ks.writes[0])].storage == Storage::Arena) {
      const TensorType& out = values_[size_t(ks.writes[0])].type;
      for (int slot : elementwise_slots(ks.steps[0].kernel.kernel)) {
        const ValueInfo& in = values_[size_t(ks.steps[0].args[size_t(slot)])];
        if (in.storage == Storage::Arena && dtype_size(in.type.dtype) == dtype_size(out.dtype) &&
            shape_str(in.type.shape) == shape_str(out.shape)) {
          ks.in_place_output = ks.writes[0];
          ks.in_place_input = ks.steps[0].args[size_t(slot)];
          break;
        }
      }
    }
    info.name = ks.steps.empty() ? "empty" : ks.steps[0].kernel.kernel.name;
    info.origins.assign(origins.begin(), origins.end());
    kernels_.push_back(std::move(info));
    schedule_.push_back(std::move(ks));
  }
  for (const Value* v : graph.outputs())
    if (!number.count(v)) add_value(v, Storage::Output, output_number.at(v));  // unreachable for valid graphs
  for (const Value* v : graph.outputs()) output_values_.push_back(number.at(v));

  stats_.nodes = int64_t(graph.num_nodes());
  for (const KernelSteps& k : schedule_) stats_.kernels += int64_t(k.steps.size());
  // The plan for the traced shapes, so stats are known before the first run.
  std::map<std::string, int64_t> hints;
  for (const TensorType& t : input_types_)
    for (const SymInt& d : t.shape)
      if (!d.is_static()) hints.emplace(d.str(), d.hint());
  try {
    plan_for(hints);
  } catch (const Error& e) {
    log::debug("planned program: no plan for the traced shapes yet: " + std::string(e.what()));
  }
}

const Program& PlannedProgram::program_for(const kernel::LoweredKernel& k, std::string* source_out,
                                           std::vector<std::vector<int>>* line_origins_out) {
  kernel::EmitOptions options;
  options.dialect = backend_.kind() == BackendKind::Cuda ? kernel::Dialect::Cuda : kernel::Dialect::Glsl;
  options.texel_reads = options.vec4_pointwise = backend_.caps().is_cpu;
  if (options.dialect == kernel::Dialect::Cuda)
    options.source_line = [this](int id) {
      auto it = source_lines_.find(id);
      return it == source_lines_.end() ? kernel::SourceLine{} : kernel::SourceLine{it->second.first, it->second.second};
    };
  kernel::EmittedKernel emitted = kernel::emit(k.kernel, options);
  if (source_out) *source_out = emitted.source;
  if (line_origins_out) *line_origins_out = emitted.line_origins;
  auto it = programs_.find(emitted.source);
  if (it != programs_.end()) return *it->second;
  ProgramSource source{k.kernel.name, kernel::language_of(options.dialect), emitted.source};
  auto program = backend_.compile(source);
  const Program& ref = *program;
  program_info_[&ref] = {k.kernel.name, source.language, emitted.source, emitted.workgroup_size, false,
                         emitted.elements_per_invocation};
  programs_.emplace(emitted.source, std::move(program));
  return ref;
}

// The backend's tuned template for a lone template_candidate op at these sizes (the same choice eager
// execution makes), or nothing to keep the generic kernel.
std::optional<PlannedProgram::LaunchPlan> PlannedProgram::template_launch(
    const KernelSteps& ks, const std::map<std::string, int64_t>& bindings) {
  std::vector<BufferView> ins, outs;
  for (int v : ks.node_inputs)
    ins.push_back({nullptr, values_[size_t(v)].type.dtype, concrete(values_[size_t(v)].type.shape, bindings)});
  for (int v : ks.node_outputs)
    outs.push_back({nullptr, values_[size_t(v)].type.dtype, concrete(values_[size_t(v)].type.shape, bindings)});
  std::optional<TemplateLaunch> t =
      backend_.plan_template(OpRun{ks.template_op->first, ks.template_op->second, ins, outs});
  if (!t) return std::nullopt;
  auto it = programs_.find(t->source);
  if (it == programs_.end()) {
    it = programs_.emplace(t->source, backend_.compile({t->name, t->language, t->source})).first;
    program_info_[it->second.get()] = {t->name, t->language, t->source, 0, true};
  }
  LaunchPlan plan{it->second.get(), {}, std::move(t->push_constants), t->groups};
  for (int slot : t->args) {
    size_t i = size_t(slot);
    plan.args.push_back(i < ks.node_inputs.size() ? ks.node_inputs[i] : ks.node_outputs.at(i - ks.node_inputs.size()));
  }
  return plan;
}

std::map<std::string, int64_t> PlannedProgram::bind(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != input_types_.size())
    throw Error("planned program: the graph has " + std::to_string(input_types_.size()) + " inputs, " +
                std::to_string(inputs.size()) + " were given");
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = input_types_[i];
    const Tensor& t = inputs[i];
    if (t.device() != device_)
      throw Error("planned program: input " + std::to_string(i) + " is on " + t.device().name() +
                  ", the program runs on " + device_.name() + "; move it with .to(device)");
    std::vector<int64_t> dims = t.sizes();
    bool ok = t.dtype() == want.dtype && dims.size() == want.rank();
    for (size_t d = 0; ok && d < dims.size(); ++d) {
      const SymInt& s = want.shape[d];
      if (s.is_static()) ok = s.value() == dims[d];
      else if (s.str().find_first_of("+-*/%(") == std::string::npos) {
        auto [it, inserted] = bindings.emplace(s.str(), dims[d]);
        ok = inserted || it->second == dims[d];
      }
    }
    if (!ok)
      throw Error("planned program: input " + std::to_string(i) + " should be " + want.str() + ", got " +
                  t.type().str());
  }
  return bindings;
}

size_t PlannedProgram::bytes_of(int value) const {
  const ValueInfo& v = values_[size_t(value)];
  return size_t(count(concrete(v.type.shape, bindings_))) * dtype_size(v.type.dtype);
}

void PlannedProgram::plan_for(const std::map<std::string, int64_t>& bindings) {
  bindings_ = bindings;
  std::vector<int> plan_index(values_.size(), -1);
  plan_values_.clear();
  plan_value_ids_.clear();
  for (size_t k = 0; k < schedule_.size(); ++k) {
    for (int w : schedule_[k].writes) {
      ValueInfo& v = values_[size_t(w)];
      if (v.storage != Storage::Arena || plan_index[size_t(w)] >= 0) continue;
      plan_index[size_t(w)] = int(plan_values_.size());
      v.index = int(plan_values_.size());
      plan_values_.push_back({v.name, bytes_of(w), int(k), int(k), -1});
      plan_value_ids_.push_back(v.graph_id);
    }
    for (int r : schedule_[k].reads)
      if (plan_index[size_t(r)] >= 0) plan_values_[size_t(plan_index[size_t(r)])].last = int(k);
    if (schedule_[k].in_place_output >= 0)
      plan_values_[size_t(plan_index[size_t(schedule_[k].in_place_output)])].in_place_of =
          plan_index[size_t(schedule_[k].in_place_input)];
  }
  MemoryPlanOptions options;
  options.max_buffer_bytes = backend_.caps().max_buffer_bytes;
  plan_ = plan_memory(plan_values_, options);
  stats_.naive_bytes = plan_.naive_bytes;
  stats_.lower_bound_bytes = plan_.lower_bound_bytes;
  stats_.planned_bytes = plan_.planned_bytes;
}

PlannedProgram::LaunchPlan PlannedProgram::copy_launch(DType dtype, int64_t elements) {
  kernel::KernelBuilder b("copy_" + std::string(dtype_name(dtype)), kernel::KernelKind::Pointwise,
                          {SymInt(elements)});
  int in = b.add_buffer(dtype, false);
  int out = b.add_buffer(dtype, true);
  b.kernel().stores.push_back({out, kernel::load(in, dtype, kernel::linear_index())});
  kernel::LoweredKernel k = b.finish();
  const Program* program = &program_for(k);
  return {program, {}, push_bytes(k.param_values()), groups_for(program, elements)};
}

std::array<uint32_t, 3> PlannedProgram::groups_for(const Program* program, int64_t elements) const {
  const ProgramInfo& info = program_info_.at(program);
  const int64_t per = info.elements_per_invocation;
  return kernel::launch_groups((elements + per - 1) / per, info.workgroup_size);
}

void PlannedProgram::prepare(const std::map<std::string, int64_t>& bindings) {
  if (stream_) stream_->sync();  // buffers below may be replaced while earlier launches read them
  plan_for(bindings);
  for (size_t a = 0; a < plan_.arena_bytes.size(); ++a) {
    if (a < arenas_.size() && arenas_[a]->bytes() >= plan_.arena_bytes[a]) continue;
    if (a >= arenas_.size()) arenas_.resize(a + 1);
    arenas_[a] = backend_.alloc(plan_.arena_bytes[a]);
  }
  launches_.clear();
  for (size_t k = 0; k < schedule_.size(); ++k) {
    const KernelSteps& ks = schedule_[k];
    if (ks.template_op)
      if (std::optional<LaunchPlan> t = template_launch(ks, bindings)) {
        launches_.push_back(std::move(*t));
        launches_.back().kernel = int(k);
        continue;
      }
    for (size_t i = 0; i < ks.steps.size(); ++i) {
      const Step& s = ks.steps[i];
      int64_t elements = s.kernel.elements(bindings);
      if (elements == 0) continue;
      launches_.push_back({s.program, s.args, push_bytes(s.kernel.param_values(bindings)),
                           groups_for(s.program, elements), int(k), int(i)});
    }
  }
  stats_.kernels = int64_t(launches_.size());  // templates may replace several generic steps
  output_copies_.clear();
  input_copies_.clear();
  owned_inputs_.clear();
  owned_outputs_.clear();
  copied_inputs_.assign(input_types_.size(), nullptr);
  for (int v : output_values_) {
    const ValueInfo& info = values_[size_t(v)];
    int64_t n = count(concrete(info.type.shape, bindings));
    bool copy = n > 0 && (info.storage != Storage::Output || options_.reduce_overhead);
    output_copies_.push_back(copy ? copy_launch(info.type.dtype, n) : LaunchPlan{nullptr, {}, {}, {}});
  }
  if (options_.reduce_overhead) {
    for (size_t i = 0; i < input_types_.size(); ++i) {
      int64_t n = count(concrete(input_types_[i].shape, bindings));
      owned_inputs_.push_back(backend_.alloc(std::max<size_t>(size_t(n) * dtype_size(input_types_[i].dtype), 4)));
      input_copies_.push_back(n > 0 ? copy_launch(input_types_[i].dtype, n) : LaunchPlan{nullptr, {}, {}, {}});
    }
    for (int v : output_values_) owned_outputs_.push_back(backend_.alloc(std::max<size_t>(bytes_of(v), 4)));
  }
  recorded_ = false;
  prepared_ = true;
}

PlannedProgram::Binding PlannedProgram::resolve(int value, const std::vector<Tensor>& inputs,
                                                const std::vector<std::shared_ptr<Buffer>>& outputs) const {
  const ValueInfo& v = values_[size_t(value)];
  switch (v.storage) {
    case Storage::Input:
      if (options_.reduce_overhead) return {owned_inputs_[size_t(v.index)].get(), 0};
      return {inputs[size_t(v.index)].impl().buffer.get(), 0};
    case Storage::Constant:
      return {constants_[size_t(v.index)].get(), 0};
    case Storage::Output:
      if (options_.reduce_overhead) return {owned_outputs_[size_t(v.index)].get(), 0};
      return {outputs[size_t(v.index)].get(), 0};
    case Storage::Arena: {
      const Placement& p = plan_.placements.at(size_t(v.index));
      return {arenas_[size_t(p.arena)].get(), p.offset};
    }
  }
  throw Error("planned program: bad value storage");
}

void PlannedProgram::launch(const LaunchPlan& plan, const std::vector<Binding>& bindings) {
  Launch l;
  l.program = plan.program;
  bool offsets = false;
  for (const Binding& b : bindings) {
    l.buffers.push_back(b.buffer);
    l.offsets.push_back(b.offset);
    offsets = offsets || b.offset != 0;
  }
  if (!offsets) l.offsets.clear();
  l.push_constants = plan.push_constants;
  l.groups = plan.groups;
  stream_->launch(l);
}

std::vector<Tensor> PlannedProgram::run(const std::vector<Tensor>& inputs) {
  std::map<std::string, int64_t> bindings = bind(inputs);
  if (!prepared_ || bindings != bindings_) prepare(bindings);
  if (!stream_) stream_ = backend_.create_stream();
  stream_->set_timing(profiling_);
  backend_.synchronize();  // inputs made by queued eager ops must be complete before we read them

  // The tensors handed back: fresh buffers each run, so earlier results stay valid.
  std::vector<std::shared_ptr<Buffer>> fresh;
  std::vector<Tensor> results;
  std::map<int, size_t> first_output;  // a value returned twice is one tensor
  for (size_t i = 0; i < output_values_.size(); ++i) {
    int v = output_values_[i];
    auto [it, inserted] = first_output.emplace(v, i);
    if (!inserted) {
      fresh.push_back(fresh[it->second]);
      results.push_back(results[it->second]);
      continue;
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->type = {values_[size_t(v)].type.dtype, make_shape(concrete(values_[size_t(v)].type.shape, bindings))};
    impl->device = device_;
    impl->buffer = backend_.alloc(std::max<size_t>(bytes_of(v), 4));
    fresh.push_back(impl->buffer);
    results.emplace_back(std::move(impl));
  }
  // Graph outputs index `fresh` by output number; values_ keep the first output's number.
  auto bind_args = [&](const std::vector<int>& args) {
    std::vector<Binding> b;
    for (int a : args) b.push_back(resolve(a, inputs, fresh));
    return b;
  };

  if (options_.reduce_overhead) {
    // Tensors are immutable: the same buffer as last call (a parameter) holds the same bytes, so
    // its copy is still current. Holding it keeps the address from being reused by another buffer.
    for (size_t i = 0; i < input_copies_.size(); ++i) {
      const std::shared_ptr<Buffer>& src = inputs[i].impl().buffer;
      if (!input_copies_[i].program || copied_inputs_[i] == src) continue;
      launch(input_copies_[i], {{src.get(), 0}, {owned_inputs_[i].get(), 0}});
      copied_inputs_[i] = src;
    }
    if (checked_mode()) {
      run_kernels_checked(bind_args);
    } else if (profiling_) {
      for (const LaunchPlan& l : launches_) launch(l, bind_args(l.args));
    } else {
      if (!recorded_) {
        stream_->begin_recording();
        for (const LaunchPlan& l : launches_) launch(l, bind_args(l.args));
        stream_->end_recording();
        recorded_ = true;
        ++recordings_;
      }
      stream_->replay();
    }
  } else if (checked_mode()) {
    run_kernels_checked(bind_args);
  } else {
    for (const LaunchPlan& l : launches_) launch(l, bind_args(l.args));
  }
  for (size_t i = 0; i < output_copies_.size(); ++i) {
    if (!output_copies_[i].program || first_output.at(output_values_[i]) != i) continue;
    Binding src = options_.reduce_overhead && values_[size_t(output_values_[i])].storage == Storage::Output
                      ? Binding{owned_outputs_[size_t(values_[size_t(output_values_[i])].index)].get(), 0}
                      : resolve(output_values_[i], inputs, fresh);
    launch(output_copies_[i], {src, {fresh[i].get(), 0}});
  }
  stream_->sync();
  return results;
}

}  // namespace kiln
