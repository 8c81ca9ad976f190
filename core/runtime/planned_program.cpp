// PlannedProgram, the executor: per set of input shapes a memory plan, arenas and push constants
// (and a recording with reduce_overhead); per run, bound buffers and launches or one replay.
#include "core/runtime/planned_program.h"

#include <algorithm>
#include <set>

#include "core/ir/strided_view.h"
#include "core/kernel/emit.h"
#include "core/runtime/checked.h"
#include "core/runtime/compile_graph.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {
PlannedProgram::~PlannedProgram() {
  if (stream_) stream_->sync();
}

PlannedProgram::PlannedProgram(const Graph& graph, Device device, const ProgramOptions& options)
    : PlannedProgram(run_program_stages(graph, device.backend(), options), device, options) {}

PlannedProgram::PlannedProgram(ProgramStages stages, Device device, const ProgramOptions& options)
    : device_(device),
      backend_(device.backend()),
      target_(stages.target),
      options_(options),
      input_types_(std::move(stages.program.input_types)),
      output_values_(std::move(stages.program.output_values)),
      values_(std::move(stages.program.values)),
      schedule_(std::move(stages.program.kernels)),
      kernels_(std::move(stages.program.kernel_info)),
      programs_(std::move(stages.compiled)),
      outputs_over_inputs_(std::move(stages.program.outputs_over_inputs)) {
  for (const ProgramConstant& c : stages.program.constants) {
    constants_.push_back(backend_.alloc(std::max<size_t>(c.literal.bytes.size(), 4)));
    if (!c.literal.bytes.empty()) backend_.upload(*constants_.back(), c.literal.bytes.data(), c.literal.bytes.size());
    constant_nodes_.push_back(c.node_id);
  }
  for (const ProgramKernel& ks : schedule_) {
    step_programs_.emplace_back();
    for (const ProgramStep& s : ks.steps) step_programs_.back().push_back(&program_for(s));
  }
  stats_.nodes = stages.program.graph_nodes;
  for (const ProgramKernel& k : schedule_) stats_.kernels += int64_t(k.steps.size());
  // The plan for the traced shapes, so stats are known before the first run (empty when the
  // traced sizes could not be planned).
  use_plan(std::move(stages.memory));
}

const CompiledKernel& PlannedProgram::program_for(const ProgramStep& s) {
  return programs_.get(s, kernel::language_of(target_.dialect));
}

// The backend's tuned template for a template_candidate op, with its epilogue, at these sizes (alone,
// the same choice eager execution makes), or nothing to keep the generic kernel.
std::optional<PlannedProgram::LaunchPlan> PlannedProgram::template_launch(
    const ProgramKernel& ks, const std::map<std::string, int64_t>& bindings) {
  std::vector<BufferView> ins, outs;
  size_t epilogue_operands = 0;
  for (const ProgramKernel::EpilogueOp& e : ks.template_epilogue) epilogue_operands += e.operand >= 0;
  for (size_t i = 0; i < ks.node_inputs.size(); ++i) {
    const ProgramValue& value = values_[size_t(ks.node_inputs[i])];
    Buffer* constant = value.storage == ValueStorage::Constant ? constants_[size_t(value.index)].get() : nullptr;
    // A graph input is the caller's tensor, written once; with reduce_overhead it is copied into a
    // buffer of the program's that the next new tensor overwrites.
    const bool stable = constant || (value.storage == ValueStorage::Input && !options_.reduce_overhead);
    ins.push_back({constant, value.type.dtype, concrete_dims(value.type.shape, bindings), stable});
    if (i >= ks.input_views.size() || ks.input_views[i].empty()) continue;
    // Views read in place: the template reads the value with their strides, or the generic kernel runs.
    std::vector<ViewStep> steps;
    for (const ProgramKernel::ViewOp& view : ks.input_views[i])
      steps.push_back({view.kind, &view.attrs, concrete_dims(view.out_shape, bindings)});
    std::optional<StridedLayout> layout = strides_through_views(ins.back().dims, steps);
    if (!layout) return std::nullopt;
    ins.back().dims = steps.back().out_dims;
    ins.back().offset = layout->offset;
    const bool epilogue_operand = i >= ks.node_inputs.size() - epilogue_operands;
    if (!epilogue_operand) ins.back().strides = std::move(layout->strides);
    else if (!is_row_major(ins.back().dims, layout->strides)) return std::nullopt;  // as schedule_kernels took it
  }
  for (int v : ks.node_outputs)
    outs.push_back({nullptr, values_[size_t(v)].type.dtype, concrete_dims(values_[size_t(v)].type.shape, bindings)});
  const OpRun run{ks.template_op->first, ks.template_op->second, ins, outs, options_.max_autotune};
  std::vector<EpilogueStep> epilogue;
  for (const ProgramKernel::EpilogueOp& e : ks.template_epilogue)
    epilogue.push_back({e.kind, &e.attrs, e.operand, e.operand_first});
  std::optional<TemplateLaunch> t =
      epilogue.empty() ? backend_.plan_template(run) : backend_.plan_fused_template(run, epilogue);
  if (!t) return std::nullopt;
  const CompiledKernel& program = programs_.get({t->name, t->language, t->source}, {t->name, t->language, t->source, 0, true});
  LaunchPlan plan{&program, {}, std::move(t->push_constants), t->groups};
  for (int slot : t->args) {
    size_t i = size_t(slot);
    plan.args.push_back(i < ks.node_inputs.size() ? ks.node_inputs[i] : ks.node_outputs.at(i - ks.node_inputs.size()));
  }
  return plan;
}

std::map<std::string, int64_t> PlannedProgram::bind(const std::vector<DeviceTensor>& inputs) const {
  if (inputs.size() != input_types_.size())
    throw Error("planned program: the graph has " + std::to_string(input_types_.size()) + " inputs, " +
                std::to_string(inputs.size()) + " were given");
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = input_types_[i];
    const DeviceTensor& t = inputs[i];
    if (t.device != device_)
      throw Error("planned program: input " + std::to_string(i) + " is on " + t.device.name() +
                  ", the program runs on " + device_.name() + "; move it with .to(device)");
    std::vector<int64_t> dims = t.sizes();
    bool ok = t.type.dtype == want.dtype && dims.size() == want.rank();
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
                  t.type.str());
  }
  return bindings;
}

size_t PlannedProgram::bytes_of(int value) const {
  const ProgramValue& v = values_[size_t(value)];
  return size_t(numel(concrete_dims(v.type.shape, bindings_))) * dtype_size(v.type.dtype);
}

void PlannedProgram::plan_for(const std::map<std::string, int64_t>& bindings) {
  use_plan(plan_program_memory(values_, schedule_, bindings, backend_.caps().max_buffer_bytes));
}

void PlannedProgram::use_plan(ProgramMemory memory) {
  bindings_ = std::move(memory.bindings);
  plan_values_ = std::move(memory.values);
  plan_value_ids_ = std::move(memory.graph_ids);
  plan_index_ = std::move(memory.plan_index);
  plan_ = std::move(memory.plan);
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
  ProgramStep step;
  step.kernel = b.finish();
  emit_step(step, kernel::emit_options_for(target_));
  const CompiledKernel* program = &program_for(step);
  return {program, {}, push_constant_bytes(step.kernel.param_values()), programs_.groups(program, elements)};
}

void PlannedProgram::prepare(const std::map<std::string, int64_t>& bindings) {
  if (stream_) stream_->sync();  // buffers below may be replaced while earlier launches read them
  prepared_ = false;  // until the end: a throw below (out of memory) leaves nothing half prepared
  plan_for(bindings);
  for (size_t a = 0; a < plan_.arena_bytes.size(); ++a) {
    if (a < arenas_.size() && arenas_[a] && arenas_[a]->bytes() >= plan_.arena_bytes[a]) continue;
    if (a >= arenas_.size()) arenas_.resize(a + 1);
    arenas_[a].reset();  // its memory may serve the bigger one
    try {
      arenas_[a] = backend_.alloc(plan_.arena_bytes[a]);
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError("compiled program on " + device_.name() +
                             ": its memory plan for these input sizes needs " +
                             std::to_string(plan_.planned_bytes) + " bytes of intermediates (arena " +
                             std::to_string(a) + ": " + std::to_string(plan_.arena_bytes[a]) +
                             " bytes): " + e.what());
    }
  }
  launches_.clear();
  kept_serials_.clear();  // the kept results' places may have moved
  for (size_t k = 0; k < schedule_.size(); ++k) {
    const ProgramKernel& ks = schedule_[k];
    if (ks.template_op)
      if (std::optional<LaunchPlan> t = template_launch(ks, bindings)) {
        launches_.push_back(std::move(*t));
        launches_.back().kernel = int(k);
        continue;
      }
    for (size_t i = 0; i < ks.steps.size(); ++i) {
      const ProgramStep& s = ks.steps[i];
      int64_t elements = s.kernel.elements(bindings);
      if (elements == 0) continue;
      const CompiledKernel* program = step_programs_[k][i];
      launches_.push_back({program, s.args, push_constant_bytes(s.kernel.param_values(bindings)),
                           programs_.groups(program, elements), int(k), int(i)});
    }
  }
  stats_.kernels = int64_t(launches_.size());  // templates may replace several generic steps
  output_copies_.clear();
  input_copies_.clear();
  owned_inputs_.clear();
  owned_outputs_.clear();
  copied_inputs_.assign(input_types_.size(), nullptr);
  for (int v : output_values_) {
    const ProgramValue& info = values_[size_t(v)];
    int64_t n = numel(concrete_dims(info.type.shape, bindings));
    bool copy = n > 0 && (info.storage != ValueStorage::Output || options_.reduce_overhead);
    output_copies_.push_back(copy ? copy_launch(info.type.dtype, n) : LaunchPlan{nullptr, {}, {}, {}});
  }
  if (options_.reduce_overhead) {
    // The pairs of outputs_over_inputs_ get their own buffers only when the input is not donated
    // (bind_direct).
    std::set<size_t> paired_inputs, paired_outputs;
    for (const OutputOverInput& p : outputs_over_inputs_) {
      paired_inputs.insert(p.input);
      paired_outputs.insert(p.output);
    }
    for (size_t i = 0; i < input_types_.size(); ++i) {
      int64_t n = numel(concrete_dims(input_types_[i].shape, bindings));
      const size_t bytes = std::max<size_t>(size_t(n) * dtype_size(input_types_[i].dtype), 4);
      owned_inputs_.push_back(paired_inputs.count(i) ? nullptr : backend_.alloc(bytes));
      input_copies_.push_back(n > 0 ? copy_launch(input_types_[i].dtype, n) : LaunchPlan{nullptr, {}, {}, {}});
    }
    for (size_t o = 0; o < output_values_.size(); ++o) {
      const size_t bytes = std::max<size_t>(bytes_of(output_values_[o]), 4);
      owned_outputs_.push_back(paired_outputs.count(o) ? nullptr : backend_.alloc(bytes));
    }
  }
  recorded_ = false;
  prepared_ = true;
}

PlannedProgram::Binding PlannedProgram::resolve(int value, const std::vector<DeviceTensor>& inputs,
                                                const std::vector<std::shared_ptr<Buffer>>& outputs) const {
  const ProgramValue& v = values_[size_t(value)];
  if (v.alias_of >= 0) return resolve(v.alias_of, inputs, outputs);
  switch (v.storage) {
    case ValueStorage::Input:
      if (Buffer* direct = direct_buffer(size_t(v.index))) return {direct, 0};
      if (options_.reduce_overhead) return {owned_inputs_[size_t(v.index)].get(), 0};
      return {inputs[size_t(v.index)].buffer.get(), 0};
    case ValueStorage::Constant:
      return {constants_[size_t(v.index)].get(), 0};
    case ValueStorage::Output:
      for (const OutputOverInput& p : outputs_over_inputs_)
        if (p.output == size_t(v.index))
          if (Buffer* direct = direct_buffer(p.input)) return {direct, 0};
      if (options_.reduce_overhead) return {owned_outputs_[size_t(v.index)].get(), 0};
      return {outputs[size_t(v.index)].get(), 0};
    case ValueStorage::Arena: {
      const Placement& p = plan_.placements.at(size_t(plan_index_.at(size_t(value))));
      return {arenas_[size_t(p.arena)].get(), p.offset};
    }
  }
  throw Error("planned program: bad value storage");
}

// The launch is filled into one reused Launch, whose vectors keep their capacity from call to call:
// a small kernel's launch costs no allocation.
void PlannedProgram::launch(const LaunchPlan& plan, const std::vector<Binding>& bindings) {
  Launch& l = launch_scratch_;
  l.program = plan.program;
  l.buffers.clear();
  l.offsets.clear();
  bool offsets = false;
  for (const Binding& b : bindings) {
    l.buffers.push_back(b.buffer);
    l.offsets.push_back(b.offset);
    offsets = offsets || b.offset != 0;
  }
  if (!offsets) l.offsets.clear();
  l.push_constants.assign(plan.push_constants.begin(), plan.push_constants.end());
  l.groups = plan.groups;
  if (queued_) queued_->push_back(l);
  else stream_->launch(l);
}

std::vector<DeviceTensor> PlannedProgram::run(const std::vector<DeviceTensor>& inputs) {
  try {
    return launch_run(inputs);
  } catch (const DeviceLostError& e) {
    throw DeviceLostError(lost_kernel_text(e), e.last_launch());
  }
}

PlannedProgram::QueuedRun PlannedProgram::queue_run(const std::vector<DeviceTensor>& inputs) {
  if (options_.reduce_overhead || checked_mode() || profiling_)
    throw Error("internal error: a queued run of a compiled program with reduce_overhead, checked mode or profiling");
  for (const DeviceTensor& t : inputs)
    if (t.donated) throw Error("internal error: a queued run of a compiled program with a donated input");
  QueuedRun queued;
  queued_ = &queued.launches;
  try {
    queued.results = launch_run(inputs);
  } catch (...) {
    queued_ = nullptr;
    throw;
  }
  queued_ = nullptr;
  return queued;
}

std::vector<DeviceTensor> PlannedProgram::launch_run(const std::vector<DeviceTensor>& inputs) {
  std::map<std::string, int64_t> bindings = bind(inputs);
  if (!prepared_ || bindings != bindings_) prepare(bindings);
  if (!stream_) stream_ = backend_.create_stream();
  stream_->set_timing(profiling_);
  backend_.synchronize();  // inputs made by queued eager ops must be complete before we read them

  if (options_.reduce_overhead) bind_direct(inputs);
  // The tensors handed back: fresh buffers each run, so earlier results stay valid, or the buffers
  // of donated inputs that this program's outputs replace, or lent outputs' own buffers.
  std::vector<std::shared_ptr<Buffer>> fresh, rewritten;
  std::vector<bool> written_in_place(output_values_.size(), false);  // no copy out
  std::vector<DeviceTensor> results;
  std::map<int, size_t> first_output;  // a value returned twice is one tensor
  for (size_t i = 0; i < output_values_.size(); ++i) {
    int v = output_values_[i];
    auto [it, inserted] = first_output.emplace(v, i);
    if (!inserted) {
      fresh.push_back(fresh[it->second]);
      results.push_back(results[it->second]);
      continue;
    }
    const ProgramValue& out = values_[size_t(v)];
    const TensorType type{out.type.dtype, make_shape(concrete_dims(out.type.shape, bindings))};
    std::shared_ptr<Buffer> buffer = donated_buffer(i, inputs);
    if (buffer) {
      rewritten.push_back(buffer);
      written_in_place[i] = true;
    } else if (is_lent(i)) {
      buffer = lend_output(i);
      written_in_place[i] = true;
    } else {
      try {
        buffer = backend_.alloc(std::max<size_t>(bytes_of(v), 4));
      } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError("compiled program on " + device_.name() + ": output " + std::to_string(i) +
                               " " + type.str() + ": " + e.what());
      }
    }
    fresh.push_back(buffer);
    results.push_back({type, device_, buffer});
  }
  // Graph outputs index `fresh` by output number; values_ keep the first output's number.
  auto bind_args = [&](const std::vector<int>& args) {
    std::vector<Binding> b;
    b.reserve(args.size());
    for (int a : args) b.push_back(resolve(a, inputs, fresh));
    return b;
  };

  if (options_.reduce_overhead) {
    // Tensors are immutable: the same buffer as last call (a parameter) holds the same bytes, so
    // its copy is still current. Holding it keeps the address from being reused by another buffer.
    for (size_t i = 0; i < input_copies_.size(); ++i) {
      const std::shared_ptr<Buffer>& src = inputs[i].buffer;
      if (!input_copies_[i].program || copied_inputs_[i] == src || direct_buffer(i)) continue;
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
    const std::vector<bool> skip = kept_from_last_run(inputs, fresh);
    try {
      for (const LaunchPlan& l : launches_)
        if (l.kernel >= 0 && skip[size_t(l.kernel)]) ++kept_launches_;
        else launch(l, bind_args(l.args));
    } catch (...) {
      kept_serials_.clear();  // a kept kernel may not have run
      throw;
    }
  }
  for (size_t i = 0; i < output_copies_.size(); ++i) {
    if (!output_copies_[i].program || first_output.at(output_values_[i]) != i) continue;
    if (written_in_place[i]) continue;
    Binding src = options_.reduce_overhead && values_[size_t(output_values_[i])].storage == ValueStorage::Output
                      ? Binding{owned_outputs_[size_t(values_[size_t(output_values_[i])].index)].get(), 0}
                      : resolve(output_values_[i], inputs, fresh);
    launch(output_copies_[i], {src, {fresh[i].get(), 0}});
  }
  if (queued_) return results;  // the caller issues the launches and waits for them
  stream_->sync();
  for (const std::shared_ptr<Buffer>& b : rewritten) b->rewritten();
  return results;
}

std::vector<bool> PlannedProgram::kept_from_last_run(const std::vector<DeviceTensor>& inputs,
                                                     const std::vector<std::shared_ptr<Buffer>>& outputs) {
  std::vector<bool> skip(schedule_.size(), false);
  kept_serials_.resize(schedule_.size());
  if (queued_ || profiling_) {  // runs that want every launch: what they keep is keyed again next run
    std::fill(kept_serials_.begin(), kept_serials_.end(), std::vector<uint64_t>{});
    return skip;
  }
  for (size_t k = 0; k < schedule_.size(); ++k) {
    if (!schedule_[k].kept) continue;
    std::vector<uint64_t> now;
    for (int r : schedule_[k].reads) {
      const Binding b = resolve(r, inputs, outputs);
      if (!b.buffer) {  // nothing to key on
        now.clear();
        break;
      }
      now.push_back(b.buffer->serial());
    }
    skip[k] = !now.empty() && now == kept_serials_[k];
    kept_serials_[k] = std::move(now);
  }
  return skip;
}

void PlannedProgram::bind_direct(const std::vector<DeviceTensor>& inputs) {
  direct_.resize(input_types_.size());
  std::vector<std::shared_ptr<Buffer>> wanted(input_types_.size());
  for (const OutputOverInput& p : outputs_over_inputs_)
    if (std::shared_ptr<Buffer> b = donated_buffer(p.output, inputs)) wanted[p.input] = b;
  for (size_t i = 0; i < wanted.size(); ++i) {
    DirectInput& d = direct_[i];
    if (d.bound == (wanted[i] != nullptr) && (!d.bound || d.buffer.lock() == wanted[i])) continue;
    d.buffer = wanted[i];
    d.bound = wanted[i] != nullptr;
    copied_inputs_[i] = nullptr;  // the owned copy fell behind while the input was bound directly
    recorded_ = false;
  }
  for (const OutputOverInput& p : outputs_over_inputs_) {
    if (wanted[p.input]) continue;
    if (!owned_inputs_[p.input]) owned_inputs_[p.input] = backend_.alloc(std::max<size_t>(inputs[p.input].bytes(), 4));
    if (!owned_outputs_[p.output])
      owned_outputs_[p.output] = backend_.alloc(std::max<size_t>(bytes_of(output_values_[p.output]), 4));
  }
}

Buffer* PlannedProgram::direct_buffer(size_t input) const {
  return input < direct_.size() && direct_[input].bound ? direct_[input].buffer.lock().get() : nullptr;
}

bool PlannedProgram::is_lent(size_t output) const {
  const ProgramValue& v = values_[size_t(output_values_[output])];
  return options_.reduce_overhead && v.storage == ValueStorage::Output && size_t(v.index) == output &&
         std::find(options_.lent_outputs.begin(), options_.lent_outputs.end(), output) != options_.lent_outputs.end();
}

std::shared_ptr<Buffer> PlannedProgram::lend_output(size_t output) {
  std::shared_ptr<Buffer>& own = owned_outputs_[output];
  if (own.use_count() > 1) {  // the caller still holds the last one: a new buffer, recorded again
    own = backend_.alloc(std::max<size_t>(bytes_of(output_values_[output]), 4));
    recorded_ = false;
  }
  return own;
}

void PlannedProgram::release_intermediates() {
  if (options_.reduce_overhead || !prepared_) return;
  if (stream_) stream_->sync();
  arenas_.clear();
  kept_serials_.clear();
  prepared_ = false;
}

std::shared_ptr<Buffer> PlannedProgram::donated_buffer(size_t output, const std::vector<DeviceTensor>& inputs) const {
  for (const OutputOverInput& p : outputs_over_inputs_) {
    if (p.output != output || !inputs[p.input].donated) continue;
    const std::shared_ptr<Buffer>& buffer = inputs[p.input].buffer;
    if (!buffer || buffer->bytes() < std::max<size_t>(bytes_of(output_values_[output]), 4)) return nullptr;
    for (size_t i = 0; i < inputs.size(); ++i)  // bound once: no other input reads it
      if (i != p.input && inputs[i].buffer == buffer) return nullptr;
    return buffer;
  }
  return nullptr;
}

}  // namespace kiln
