// kiln::compile's engine: the guarded cache, tracing, recompiles with reasons, graph breaks.
#include "core/frontend/compile.h"

#include <algorithm>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "core/autodiff/partition.h"
#include "core/frontend/autograd.h"
#include "core/frontend/guards.h"
#include "core/frontend/lazy.h"
#include "core/frontend/nn/module.h"
#include "core/frontend/run_program.h"
#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"
#include "core/ir/text.h"
#include "core/passes/pass.h"
#include "core/runtime/compile_graph.h"
#include "core/runtime/planned_program.h"
#include "core/support/log.h"
#include "core/trace/bundle.h"
#include "core/trace/program_bundle.h"

namespace kiln::compile_detail {

namespace {

// Forwards shape decisions to the tracer and keeps each with the module scope it was made in.
class DecisionRecorder : public GuardSink {
 public:
  explicit DecisionRecorder(Tracer& tracer) : tracer_(tracer) {}
  void record(const ShapeGuard& guard) override {
    tracer_.record(guard);
    decisions.push_back({guard, current_scope()});
  }
  std::vector<DecisionGuard> decisions;

 private:
  Tracer& tracer_;
};

// A training step's effect on eager tensors, applied after each run: output `output` of the
// program becomes the value (or, `grad`, the gradient) of the tensor bound to program input
// `input` (a captured parameter or optimizer state); `clear` drops the gradient instead.
struct WriteBack {
  size_t input = 0;
  size_t output = 0;
  bool grad = false;
  bool clear = false;
};

struct Trace {
  Graph graph;
  std::vector<std::pair<Value*, Tensor>> captured;
  std::vector<DecisionGuard> decisions;
  std::vector<TensorGuard> tensors;  // by argument index
  size_t outputs = 0;                // the function's own; writes-back follow
  std::vector<WriteBack> writes;
  std::vector<Tracer::GradStart> grad_starts;  // gradients a backward adds to, as the call starts
};

// "x.cpp:12 [fc]": where the graph first reads `value`.
std::string first_use(const Graph& graph, const Value* value) {
  for (const Node* node : graph.nodes())
    for (const Value* in : node->inputs)
      if (in == value) return node->provenance.str() + " (op '" + std::string(op_name(node->kind)) + "')";
  return "a graph output";
}

// t's dims as traced: symbols s<next>, s<next+1>, ... where `symbolic` says, else the sizes.
Shape traced_dims(const Tensor& t, const std::vector<bool>& symbolic, int* next_symbol) {
  Shape dims;
  std::vector<int64_t> sizes = t.sizes();
  for (size_t d = 0; d < sizes.size(); ++d)
    dims.push_back(symbolic[d] ? SymInt::symbol("s" + std::to_string((*next_symbol)++), sizes[d])
                               : SymInt(sizes[d]));
  return dims;
}

// A training step's writes into eager tensors become extra graph outputs: the last write of each
// target's value and of its gradient, the target a program input (captured here if the function
// only wrote it).
std::vector<WriteBack> functionalize(Tracer& tracer) {
  const size_t inputs_before = tracer.graph().inputs().size() - tracer.captured().size();
  std::vector<WriteBack> writes;
  std::vector<std::pair<const TensorImpl*, bool>> done;  // (target, grad)
  const std::vector<Tracer::Write> all = tracer.writes();
  for (auto w = all.rbegin(); w != all.rend(); ++w) {
    const std::pair<const TensorImpl*, bool> key{&w->target.impl(), w->grad};
    if (std::find(done.begin(), done.end(), key) != done.end()) continue;
    done.push_back(key);
    // The target's capture (bound as an input all the same when the function only wrote it).
    const Value* target = tracer.captured_input(w->target);
    size_t capture = 0;
    while (tracer.captured()[capture].first != target) ++capture;
    WriteBack back{inputs_before + capture, tracer.graph().outputs().size(), w->grad, w->value == nullptr};
    if (w->value) tracer.graph().add_output(w->value);
    writes.push_back(back);
  }
  std::reverse(writes.begin(), writes.end());
  return writes;
}

}  // namespace

struct Entry {
  EntryGuards guards;
  std::unique_ptr<DeviceProgram> program;  // null: fn broke the graph and runs in lazy mode
  std::unique_ptr<LazySegments> lazy;      // the compiled segments between its breaks
  std::string break_location;
  // For bundles made later (Compiled::bundle): the optimized graph, its passes and the device.
  std::unique_ptr<Trace> traced;
  std::vector<PassRecord> passes;
  std::optional<Device> device;
  // A training step's writes-back (its program's outputs past `outputs`).
  size_t outputs = 0;
  std::vector<WriteBack> writes;
  // For differentiable calls, by which inputs require grad ("0110").
  std::map<std::string, std::unique_ptr<struct BackwardPlan>> backward;
};

// How an entry runs a call that must be differentiable: a forward program that also returns the
// values the backward saves (values_to_save), and the function traced with every size fixed, per
// input sizes, which the call's autograd node records (its backward inlines that graph).
struct BackwardPlan {
  std::unique_ptr<DeviceProgram> program;
  size_t outputs = 0;                            // the function's own outputs come first
  std::vector<std::pair<size_t, size_t>> saved;  // (node, output) in trace order
  std::map<std::string, std::shared_ptr<const Graph>> graphs;  // by input types
};

// "0110": which of the program's inputs require grad; empty when the call needs no gradient.
std::string grad_inputs_key(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return "";
  std::string key;
  bool any = false;
  for (const Tensor& t : inputs) {
    key += t.requires_grad() ? '1' : '0';
    any = any || t.requires_grad();
  }
  return any ? key : "";
}

struct Engine::State {
  CompileOptions options;
  std::string name;
  std::recursive_mutex mutex;  // recursive: a compiled function may call itself while tracing
  std::vector<std::unique_ptr<Entry>> entries;  // checked newest first
  CompileStats stats;
  // Automatic dynamic shapes: per argument, the sizes at the last compile and the dims that
  // changed between compiles (those are traced symbolic from then on).
  std::vector<std::vector<int64_t>> last_sizes;
  std::vector<std::set<size_t>> dynamic_dims;
  bool past_limit_warned = false;
  // The entry whose program ran last. When another one runs, the last one's intermediates are
  // freed (DeviceProgram::release_intermediates): a function holds one program's arena at a time.
  Entry* last_run = nullptr;
  void switch_to(Entry& entry);
  std::set<std::string> warned_breaks;

  std::vector<Tensor> compile_and_run(std::span<const ArgView> args,
                                      const std::vector<ModuleTensors>& modules, TraceFn trace,
                                      EagerFn eager, std::string reason);
  Trace trace_once(std::span<const ArgView> args, TraceFn trace, const Device& device,
                   const std::vector<std::vector<bool>>& symbolic);
  EntryGuards make_guards(std::span<const ArgView> args, const std::vector<ModuleTensors>& modules,
                          Trace& trace, const Device& device);
  std::vector<std::vector<bool>> choose_symbolic(std::span<const ArgView> args,
                                                 std::string* reason);
  std::vector<Tensor> run_lazy(Entry& entry, EagerFn eager);
  std::vector<Tensor> run_entry(Entry& entry, std::span<const ArgView> args,
                                const std::vector<ModuleTensors>& modules, TraceFn trace);
  BackwardPlan& backward_plan(Entry& entry, std::span<const ArgView> args, TraceFn trace,
                              const std::vector<Tensor>& inputs, const std::string& key);
  std::shared_ptr<const Graph> fixed_size_graph(BackwardPlan& plan, Entry& entry, std::span<const ArgView> args,
                                                TraceFn trace, const std::vector<Tensor>& inputs);
};

// A program's run records nothing for autograd itself (an interpreted program runs eager ops):
// a differentiable call records one node for the whole call instead.
std::vector<Tensor> run_unrecorded(DeviceProgram& program, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return kiln::run_program(program, inputs);
}

// Runs a training step's program. Where only its tensor holds the buffer of a value the step
// replaces, the buffer is donated: the program may write the new value over it. Gradients the step
// replaces without reading are dropped first, as its zero_grad would. The step then holds one copy
// of the parameters, gradients and optimizer state, not two.
std::vector<Tensor> run_step(DeviceProgram& program, const std::vector<WriteBack>& writes,
                             const std::vector<Tensor>& inputs) {
  std::vector<DeviceTensor> args = device_tensors(inputs);
  for (const WriteBack& w : writes) {
    TensorImpl& target = inputs.at(w.input).impl();
    if (!w.grad) {
      args[w.input].donated = target.buffer.use_count() == 2;  // the tensor's and args' own
      continue;
    }
    const bool read = std::any_of(inputs.begin(), inputs.end(),
                                  [&](const Tensor& t) { return t.defined() && &t.impl() == target.grad.get(); });
    if (target.grad && !read) target.grad = nullptr;
  }
  NoGradGuard no_grad;
  return tensors_of(program.run(args));
}

// Whether a function's writes include gradients: it ran a backward (a training step).
bool writes_gradients(const std::vector<WriteBack>& writes) {
  return std::any_of(writes.begin(), writes.end(), [](const WriteBack& w) { return w.grad; });
}

// The outputs of a training step's program that replace its inputs' values.
std::vector<OutputOverInput> updated_inputs(const std::vector<WriteBack>& writes) {
  std::vector<OutputOverInput> pairs;
  for (const WriteBack& w : writes)
    if (!w.grad && !w.clear) pairs.push_back({w.output, w.input});
  return pairs;
}

// Applies a training step's writes to the tensors bound to its inputs; returns its own outputs.
std::vector<Tensor> write_back(const Entry& entry, const std::vector<Tensor>& inputs, const std::vector<Tensor>& all) {
  for (const WriteBack& w : entry.writes) {
    TensorImpl& target = inputs.at(w.input).impl();
    if (w.clear) {
      target.grad = nullptr;
    } else if (w.grad) {
      target.grad = all.at(w.output).impl_ptr();
    } else {
      target.buffer = all.at(w.output).impl().buffer;
    }
  }
  return std::vector<Tensor>(all.begin(), all.begin() + long(entry.outputs));
}

void Engine::State::switch_to(Entry& entry) {
  if (last_run && last_run != &entry && last_run->program) last_run->program->release_intermediates();
  last_run = &entry;
}

std::vector<Tensor> Engine::State::run_entry(Entry& entry, std::span<const ArgView> args,
                                             const std::vector<ModuleTensors>& modules, TraceFn trace) {
  switch_to(entry);
  const std::vector<Tensor> inputs = entry.guards.program_inputs(args, modules);
  const std::string key = grad_inputs_key(inputs);
  // A training step (it ran a backward: it writes gradients) or a call no gradient goes through:
  // its outputs are final, its updates written back. A differentiable forward's writes (batch
  // norm's running statistics) are written back after the differentiable run below.
  if (!entry.writes.empty() && (writes_gradients(entry.writes) || key.empty())) {
    std::vector<Tensor> all = run_step(*entry.program, entry.writes, inputs);
    stats.program = entry.program->stats();
    return write_back(entry, inputs, all);
  }
  if (key.empty()) {
    std::vector<Tensor> out = run_unrecorded(*entry.program, inputs);
    stats.program = entry.program->stats();  // launches are settled once the shapes are bound
    return out;
  }
  BackwardPlan& plan = backward_plan(entry, args, trace, inputs, key);
  std::vector<Tensor> all = run_unrecorded(*plan.program, inputs);
  stats.program = plan.program->stats();
  std::shared_ptr<const Graph> graph = fixed_size_graph(plan, entry, args, trace, inputs);
  const std::vector<Node*> nodes = graph->nodes();
  std::vector<std::pair<const Value*, Tensor>> saved;
  for (size_t k = 0; k < plan.saved.size(); ++k)
    saved.emplace_back(nodes.at(plan.saved[k].first)->outputs.at(plan.saved[k].second), all[plan.outputs + k]);
  std::vector<Tensor> out(all.begin(), all.begin() + long(plan.outputs));
  record_compiled_call(graph, inputs, out, saved);
  return entry.writes.empty() ? out : write_back(entry, inputs, out);
}

std::shared_ptr<const Graph> Engine::State::fixed_size_graph(BackwardPlan& plan, Entry& entry,
                                                             std::span<const ArgView> args, TraceFn trace,
                                                             const std::vector<Tensor>& inputs) {
  std::string key;
  for (const Tensor& t : inputs) key += t.type().str() + ";";
  auto it = plan.graphs.find(key);
  if (it != plan.graphs.end()) return it->second;
  std::vector<std::vector<bool>> fixed(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].kind == ArgKind::Tensor && args[i].tensor->defined()) fixed[i].assign(size_t(args[i].tensor->dim()), false);
  auto graph = std::make_shared<const Graph>(std::move(trace_once(args, trace, *entry.device, fixed).graph));
  if (graph->inputs().size() != inputs.size())
    throw Error("kiln::compile: " + name + " traced with " + std::to_string(graph->inputs().size()) +
                " inputs for autograd, where its program has " + std::to_string(inputs.size()));
  return plan.graphs.emplace(key, graph).first->second;
}

// The forward that also returns what the backward saves: the function traced as the entry was
// (sizes symbolic where its guards are), the saved values appended to its outputs, compiled.
BackwardPlan& Engine::State::backward_plan(Entry& entry, std::span<const ArgView> args, TraceFn trace,
                                           const std::vector<Tensor>& inputs, const std::string& key) {
  std::unique_ptr<BackwardPlan>& plan = entry.backward[key];
  if (plan) return *plan;
  auto fresh = std::make_unique<BackwardPlan>();
  const std::shared_ptr<const Graph> fixed = fixed_size_graph(*fresh, entry, args, trace, inputs);
  std::vector<bool> wrt;
  for (char c : key) wrt.push_back(c == '1');
  std::map<const Value*, std::pair<size_t, size_t>> position;
  const std::vector<Node*> fixed_nodes = fixed->nodes();
  for (size_t n = 0; n < fixed_nodes.size(); ++n)
    for (size_t k = 0; k < fixed_nodes[n]->outputs.size(); ++k) position[fixed_nodes[n]->outputs[k]] = {n, k};
  const Partition partition = partition_for_backward(*fixed, wrt, {.memory_budget = options.memory_budget});
  if (const std::string dir = dump_directory(PipelineOptions{}); !dir.empty()) {  // KILN_DUMP_IR
    std::filesystem::create_directories(dir);
    std::ofstream(std::filesystem::path(dir) / "partition.txt") << "// kiln partition of " << name << "\n"
                                                                  << print_partition(partition);
  }
  for (const Value* v : partition.saved) fresh->saved.push_back(position.at(v));

  std::vector<std::vector<bool>> symbolic(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    for (const SymInt& d : entry.guards.tensors[i].dims) symbolic[i].push_back(!d.is_static());
  Trace traced = trace_once(args, trace, *entry.device, symbolic);
  const std::vector<Node*> nodes = traced.graph.nodes();
  if (nodes.size() != fixed_nodes.size())
    throw Error("kiln::compile: " + name + " traced to " + std::to_string(nodes.size()) + " and " +
                std::to_string(fixed_nodes.size()) + " nodes at the same call; a differentiable compiled "
                "function must trace the same ops every time");
  fresh->outputs = traced.graph.outputs().size();
  for (const auto& [n, k] : fresh->saved) traced.graph.add_output(nodes[n]->outputs.at(k));
  CompileGraphOptions graph_options;
  graph_options.program.reduce_overhead = options.mode == Mode::ReduceOverhead;
  graph_options.program.max_autotune = options.mode == Mode::MaxAutotune;
  fresh->program = compile_graph(traced.graph, *entry.device, graph_options).program;
  plan = std::move(fresh);
  return *plan;
}

std::vector<Tensor> Engine::State::run_lazy(Entry& entry, EagerFn eager) {
  ++stats.lazy_calls;
  const LazyStats before = entry.lazy->stats();
  std::vector<Tensor> out = entry.lazy->run(eager);
  stats.segments_compiled += entry.lazy->stats().segments_compiled - before.segments_compiled;
  stats.segment_runs += entry.lazy->stats().segment_runs - before.segment_runs;
  if (entry.lazy->last_program()) stats.program = *entry.lazy->last_program();
  return out;
}

Engine::Engine(CompileOptions options, std::string name) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->name = std::move(name);
}

Engine::~Engine() = default;

CompileStats Engine::stats() const {
  std::lock_guard lock(state_->mutex);
  CompileStats s = state_->stats;
  s.cache_entries = int64_t(state_->entries.size());
  return s;
}

std::vector<Tensor> Engine::call(std::span<const ArgView> args, TraceFn trace, EagerFn eager) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  ++s.stats.calls;
  // Module tensors are looked up at every call: load_state_dict and Module::to replace the
  // Tensor objects in the module's slots, and replay must read the current ones.
  std::vector<ModuleTensors> modules(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].kind == ArgKind::Module) modules[i] = args[i].module->named_tensors();

  std::vector<std::string> misses;
  for (auto it = s.entries.rbegin(); it != s.entries.rend(); ++it) {
    Entry& entry = **it;
    std::optional<std::string> why = entry.guards.check(args, modules);
    if (why) {
      misses.push_back(*why);
      continue;
    }
    ++s.stats.cache_hits;
    if (!entry.program) return s.run_lazy(entry, eager);  // differentiable ops run eagerly there
    return s.run_entry(entry, args, modules, trace);
  }

  std::string reason = misses.empty() ? "" : misses.front();
  if (!s.entries.empty() && int(s.entries.size()) >= s.options.recompile_limit) {
    std::string limit = std::to_string(s.options.recompile_limit);
    if (s.options.on_limit == OnLimit::Error)
      throw Error("kiln::compile: " + s.name + " hit recompile_limit (" + limit +
                  " cache entries); last guard failure: " + reason +
                  ". Raise recompile_limit, mark the changing dims symbolic "
                  "(dynamic = Dynamic::Symbolic), or set on_limit = OnLimit::Eager");
    if (!s.past_limit_warned) {
      s.past_limit_warned = true;
      log::warn("kiln::compile: " + s.name + " hit recompile_limit (" + limit +
                " cache entries); last guard failure: " + reason +
                ". Calls that miss the cache now run eagerly (on_limit = Eager)");
    }
    ++s.stats.eager_calls;
    return eager();
  }
  if (misses.size() > 1) {
    log::debug("kiln::compile: " + s.name + ": every cache entry missed:");
    for (size_t i = 0; i < misses.size(); ++i)
      log::debug("  entry " + std::to_string(misses.size() - 1 - i) + ": " + misses[i]);
  }
  return s.compile_and_run(args, modules, trace, eager, reason);
}

std::vector<std::vector<bool>> Engine::State::choose_symbolic(std::span<const ArgView> args,
                                                              std::string* reason) {
  last_sizes.resize(args.size());
  dynamic_dims.resize(args.size());
  std::vector<std::vector<bool>> symbolic(args.size());
  std::string newly;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != ArgKind::Tensor || !args[i].tensor->defined()) continue;
    std::vector<int64_t> sizes = args[i].tensor->sizes();
    if (last_sizes[i].size() == sizes.size())
      for (size_t d = 0; d < sizes.size(); ++d)
        if (last_sizes[i][d] != sizes[d] && dynamic_dims[i].insert(d).second)
          newly += std::string(newly.empty() ? "" : ", ") + "arg " + std::to_string(i) + " dim " +
                   std::to_string(d);
    last_sizes[i] = sizes;
    symbolic[i].resize(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      bool wanted = options.dynamic == Dynamic::Symbolic ||
                    (options.dynamic == Dynamic::Auto && dynamic_dims[i].count(d));
      symbolic[i][d] = wanted && sizes[d] >= 2;  // 0 and 1 stay specialized, as in torch
    }
  }
  if (!newly.empty() && options.dynamic == Dynamic::Auto)
    *reason += "; automatic dynamic shapes: " + newly + " now symbolic";
  return symbolic;
}

Trace Engine::State::trace_once(std::span<const ArgView> args, TraceFn trace,
                                const Device& device,
                                const std::vector<std::vector<bool>>& symbolic) {
  Tracer tracer(device);
  DecisionRecorder recorder(tracer);
  Trace result;
  result.tensors.resize(args.size());
  std::vector<Tensor> traced_args;
  int next_symbol = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != ArgKind::Tensor) continue;
    const Tensor& t = *args[i].tensor;
    TensorGuard& g = result.tensors[i];
    g.defined = t.defined();
    if (!g.defined) {
      traced_args.emplace_back();
      continue;
    }
    g.dtype = t.dtype();
    g.device = t.device();
    g.dims = traced_dims(t, symbolic[i], &next_symbol);
    traced_args.push_back(tracer.input({g.dtype, g.dims}, "arg" + std::to_string(i)));
  }
  {
    GuardSinkScope sink(&recorder);
    CompilingScope compiling(tracer);
    std::vector<Tensor> outputs = trace(traced_args);
    for (size_t k = 0; k < outputs.size(); ++k)
      if (!outputs[k].defined())
        throw Error("kiln::compile: " + name + " returned an undefined tensor as output " +
                    std::to_string(k));
    tracer.set_outputs(outputs);
  }
  result.outputs = tracer.graph().outputs().size();
  result.writes = functionalize(tracer);
  result.captured = tracer.captured();
  result.grad_starts = tracer.grad_starts();
  result.decisions = std::move(recorder.decisions);
  result.graph = std::move(tracer.graph());
  return result;
}

EntryGuards Engine::State::make_guards(std::span<const ArgView> args,
                                       const std::vector<ModuleTensors>& modules, Trace& trace,
                                       const Device& device) {
  EntryGuards g;
  g.tensors = std::move(trace.tensors);
  g.decisions = std::move(trace.decisions);
  g.scalars.resize(args.size());
  g.module_sizes.resize(args.size());
  g.module_modes.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    g.kinds.push_back(args[i].kind);
    g.scalars[i] = {args[i].scalar_kind, args[i].scalar_int, args[i].scalar_float};
    g.module_sizes[i] = modules[i].size();
    if (args[i].kind == ArgKind::Module) g.module_modes[i] = training_modes(*args[i].module);
  }
  std::vector<const TensorImpl*> captured_impls;  // the loop below moves the handles out
  for (const auto& [value, tensor] : trace.captured) captured_impls.push_back(&tensor.impl());
  for (size_t k = 0; k < trace.captured.size(); ++k) {
    auto& [value, tensor] = trace.captured[k];
    CaptureSource c;
    c.type = tensor.type();
    c.device = tensor.device();
    if (c.device != device)
      throw Error("kiln::compile: " + name + ": " + first_use(trace.graph, value) + " reads a " +
                  c.type.str() + " tensor on " + c.device.name() + " while the inputs are on " +
                  device.name() + "; move it (or its module) with .to(" + device.name() + ")");
    for (size_t m = 0; m < modules.size() && !c.from_module; ++m)
      for (size_t j = 0; j < modules[m].size(); ++j)
        if (modules[m][j].second->impl_ptr() == tensor.impl_ptr()) {
          c.from_module = true;
          c.arg = m;
          c.index = j;
          c.name = modules[m][j].first;
          value->name = c.name;  // graph dumps show "fc1.weight" rather than "captured3"
          break;
        }
    if (!c.from_module) {
      c.name = "captured" + std::to_string(k) + " at " + first_use(trace.graph, value);
      c.fixed = std::move(tensor);
    }
    g.captures.push_back(std::move(c));
  }
  // A backward that adds to a parameter's gradient from before the call: the parameter's capture
  // guards whether it is defined, and the gradient (captured when it was) is read from the
  // parameter at each call rather than kept as the handle the trace saw.
  auto capture_of = [&](const TensorImpl* impl) {
    auto it = std::find(captured_impls.begin(), captured_impls.end(), impl);
    return it == captured_impls.end() ? -1 : int(it - captured_impls.begin());
  };
  for (const Tracer::GradStart& start : trace.grad_starts) {
    const int param = capture_of(&start.target.impl());
    if (param < 0) continue;  // not read by the program: its gradient is only written
    g.captures[size_t(param)].grad_defined = start.defined ? 1 : 0;
    const int grad = start.defined ? capture_of(start.target.impl().grad.get()) : -1;
    if (grad < 0) continue;
    CaptureSource& c = g.captures[size_t(grad)];
    c.grad_of = param;
    c.from_module = false;
    c.fixed = Tensor();
    c.name = g.captures[size_t(param)].name + ".grad";
    trace.captured[size_t(grad)].first->name = c.name;
  }
  trace.captured.clear();
  trace.grad_starts.clear();
  // Now that the tracer is gone, a count above one means someone else owns the tensor (a module
  // reached through a lambda capture): if that owner later lets go, the copy here is stale.
  for (CaptureSource& c : g.captures)
    if (!c.from_module && c.grad_of < 0) c.owned_elsewhere = c.fixed.impl_ptr().use_count() > 1;
  return g;
}

// The trace bundle kiln-debug opens: IR after each pass, the kernels that ran with their source
// lines, SPIR-V, memory plan and device times (a planned program; the interpreter's programs get one
// kernel per node), guards and recompile reasons. One directory per compile: DIR/<name>_<N>/.
trace::Bundle debug_bundle(const std::string& name, const Device& device, const Trace& traced,
                           const std::vector<PassRecord>& passes, const CompileStats& stats,
                           const DeviceProgram* program, const std::vector<LaunchTiming>& timings) {
  trace::Bundle bundle;
  if (const auto* planned = dynamic_cast<const PlannedProgram*>(program)) {
    bundle = trace::make_program_bundle(traced.graph, *planned, timings, {.name = name});
  } else {
    trace::MakeBundleOptions bundle_options;
    bundle_options.name = name;
    bundle = trace::make_bundle(traced.graph, bundle_options);
  }
  bundle.device = device.name();
  // The per-pass records replace the bundle's one "input" entry (which shows the final graph).
  if (!passes.empty()) bundle.passes.clear();
  trace::record_passes(bundle, passes);
  std::vector<ShapeGuard> decisions;
  for (const DecisionGuard& d : traced.decisions) decisions.push_back(d.guard);
  trace::record_guards(bundle, decisions);
  for (const std::string& reason : stats.recompile_reasons) bundle.recompiles.push_back({reason, "", 0});
  for (const std::string& where : stats.graph_break_locations) bundle.graph_breaks.push_back({where, "", 0});
  return bundle;
}

void write_debug_bundle(const std::string& dir, const std::string& name, int compile_index,
                        const Device& device, const Trace& traced, const std::vector<PassRecord>& passes,
                        const CompileStats& stats, const DeviceProgram* program,
                        const std::vector<LaunchTiming>& timings) {
  trace::Bundle bundle = debug_bundle(name, device, traced, passes, stats, program, timings);
  std::string path = dir + "/" + name + "_" + std::to_string(compile_index);
  try {
    trace::write_bundle(path, bundle);
    log::info("kiln::compile: wrote the debug bundle " + path + " (open it with kiln-debug)");
  } catch (const Error& e) {
    log::warn(std::string("kiln::compile: ") + e.what());
  }
}


std::vector<Tensor> Engine::State::compile_and_run(std::span<const ArgView> args,
                                                   const std::vector<ModuleTensors>& modules,
                                                   TraceFn trace, EagerFn eager,
                                                   std::string reason) {
  // The program runs where the tensor arguments live; they must agree.
  std::optional<Device> device;
  size_t device_arg = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != ArgKind::Tensor || !args[i].tensor->defined()) continue;
    Device d = args[i].tensor->device();
    if (!device) {
      device = d;
      device_arg = i;
    } else if (d != *device) {
      throw Error("kiln::compile: " + name + ": tensor arguments are on different devices (arg " +
                  std::to_string(device_arg) + " on " + device->name() + ", arg " +
                  std::to_string(i) + " on " + d.name() + "); move them with .to(device)");
    }
  }
  if (!device)  // no tensor arguments: follow the first module's parameters
    for (const ModuleTensors& m : modules)
      if (!m.empty() && m[0].second->defined()) {
        device = m[0].second->device();
        break;
      }
  if (!device) device = Device::cpu();

  bool first = entries.empty();
  std::vector<std::vector<bool>> symbolic = choose_symbolic(args, &reason);
  if (!first) {
    ++stats.recompiles;
    stats.recompile_reasons.push_back(reason);
    log::info("kiln::compile: recompiling " + name + " (cache entry " +
              std::to_string(entries.size() + 1) + " of at most " +
              std::to_string(options.recompile_limit) + "): " + reason);
  }

  auto entry = std::make_unique<Entry>();
  std::optional<Trace> traced;
  try {
    try {
      traced = trace_once(args, trace, *device, symbolic);
    } catch (const GraphBreak&) {
      throw;
    } catch (const Error& e) {
      bool any_symbolic = false;
      for (const auto& dims : symbolic)
        for (bool b : dims) any_symbolic = any_symbolic || b;
      if (!any_symbolic) throw;
      // Some op could not take a symbolic size: specialize this compile instead of failing.
      log::info("kiln::compile: " + name + ": tracing with symbolic sizes failed (" + e.what() +
                "); specializing every size for this compile");
      for (auto& dims : symbolic) dims.assign(dims.size(), false);
      traced = trace_once(args, trace, *device, symbolic);
    }
  } catch (const GraphBreak& b) {
    std::string where = short_location(b.where);
    if (options.fullgraph)
      throw Error("kiln::compile: " + name + " (fullgraph = true): " + b.what() +
                  ". Move the host read out of the compiled function, or set fullgraph = false "
                  "to run it eagerly");
    ++stats.graph_breaks;
    stats.graph_break_locations.push_back(where);
    if (warned_breaks.insert(where).second)
      log::warn("kiln::compile: " + name + ": " + b.what() +
                ". Calls like this one run in lazy mode: the ops between breaks are recorded "
                "and run as compiled segments, each compiled once. fullgraph = true makes this "
                "an error");
    // An eager entry guards the call's argument types (sizes symbolic where the dynamic policy
    // says so), not the broken trace's decisions: fn did not finish, so later ones are unknown.
    Trace shell;
    shell.tensors.resize(args.size());
    int next_symbol = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind != ArgKind::Tensor || !args[i].tensor->defined()) continue;
      const Tensor& t = *args[i].tensor;
      shell.tensors[i] = {true, t.dtype(), t.device(), traced_dims(t, symbolic[i], &next_symbol)};
    }
    entry->guards = make_guards(args, modules, shell, *device);
    entry->break_location = where;
    ProgramOptions lazy_options;
    lazy_options.reduce_overhead = options.mode == Mode::ReduceOverhead;
    lazy_options.max_autotune = options.mode == Mode::MaxAutotune;
    entry->lazy = std::make_unique<LazySegments>(*device, lazy_options);
    ++stats.compiles;
    entries.push_back(std::move(entry));
    return run_lazy(*entries.back(), eager);
  }

  entry->guards = make_guards(args, modules, *traced, *device);
  entry->outputs = traced->outputs;
  entry->writes = traced->writes;
  const std::string debug_dir = !options.debug_dir.empty()            ? options.debug_dir
                                : std::getenv("KILN_DEBUG") != nullptr ? std::getenv("KILN_DEBUG")
                                                                       : "";
  CompileGraphOptions graph_options;
  graph_options.pipeline.keep_ir = !debug_dir.empty();
  graph_options.program.reduce_overhead = options.mode == Mode::ReduceOverhead;
  graph_options.program.max_autotune = options.mode == Mode::MaxAutotune;
  graph_options.program.outputs_over_inputs = updated_inputs(traced->writes);
  for (size_t i = traced->graph.inputs().size() - traced->captured.size(); i < traced->graph.inputs().size(); ++i)
    graph_options.program.parameter_inputs.push_back(i);  // captures: parameters and state, not the call's data
  for (const WriteBack& w : traced->writes)
    if (w.grad && !w.clear) graph_options.program.lent_outputs.push_back(w.output);
  std::vector<PassRecord> pass_records;
  const int compile_index = int(stats.compiles);
  auto write_bundle = [&](const DeviceProgram* program, const std::vector<LaunchTiming>& timings) {
    write_debug_bundle(debug_dir, name, compile_index, *device, *traced, pass_records, stats, program, timings);
  };
  try {
    CompiledGraph compiled = compile_graph(traced->graph, *device, graph_options);
    pass_records = std::move(compiled.passes);
    entry->program = std::move(compiled.program);
  } catch (const Error&) {
    if (!debug_dir.empty()) write_bundle(nullptr, {});  // the graph that failed to build, per node
    throw;
  }
  stats.program = entry->program->stats();
  ++stats.compiles;
  log::debug("kiln::compile: compiled " + name + " for " + device->name() + ": " +
             std::to_string(traced->graph.num_nodes()) + " nodes, " +
             std::to_string(stats.program.kernels) + " kernels, " +
             std::to_string(entry->guards.decisions.size()) + " shape decisions");
  Entry& stored = *entry;
  entries.push_back(std::move(entry));
  stored.device = *device;
  stored.passes = pass_records;
  std::vector<Tensor> inputs = stored.guards.program_inputs(args, modules);
  if (debug_dir.empty()) {
    stored.traced = std::make_unique<Trace>(std::move(*traced));
    return run_entry(stored, args, modules, trace);
  }
  // The bundle records this first run, profiled. It is written when the run fails too (a checked
  // mode error), since that is when it is wanted.
  std::vector<LaunchTiming> timings;
  switch_to(stored);
  auto* planned = dynamic_cast<PlannedProgram*>(stored.program.get());
  std::vector<Tensor> results;
  try {
    NoGradGuard no_grad;
    results = planned ? tensors_of(planned->run_profiled(device_tensors(inputs), timings))
                      : run_program(*stored.program, inputs);
  } catch (const Error&) {
    write_bundle(stored.program.get(), {});
    throw;
  }
  write_bundle(stored.program.get(), timings);
  stored.traced = std::make_unique<Trace>(std::move(*traced));
  stats.program = stored.program->stats();
  if (!grad_inputs_key(inputs).empty() && !writes_gradients(stored.writes))
    return run_entry(stored, args, modules, trace);  // differentiable: run again, recorded
  if (!stored.writes.empty()) return write_back(stored, inputs, results);
  return results;
}

trace::Bundle Engine::bundle() const {
  std::lock_guard lock(state_->mutex);
  const State& s = *state_;
  if (s.entries.empty())
    throw Error("kiln::compile: " + s.name + " has not been compiled yet; call it once first");
  const Entry& e = *s.entries.back();
  if (!e.program || !e.traced)
    throw Error("kiln::compile: " + s.name + "'s latest call signature runs in lazy mode (a graph "
                "break at " + e.break_location + "): its segments have no single program to show");
  return debug_bundle(s.name, *e.device, *e.traced, e.passes, s.stats, e.program.get(), {});
}

void check_options(const CompileOptions& options) {
  if (options.mode == Mode::MaxAutotune) {
    // The compiled program's template ops (f32 matmul/linear/gemm on Vulkan) time their tile variants
    // once per shape class and persist the choice; fused kernels have no variants to time yet.
    static std::once_flag said;
    std::call_once(said, [] {
      log::info("kiln::compile: max-autotune times the Vulkan matmul template's tiles (template ops); "
                "fused generated kernels are not autotuned yet");
    });
  }
  if (options.recompile_limit < 1)
    throw Error("kiln::compile: recompile_limit must be at least 1, got " +
                std::to_string(options.recompile_limit));
  if (!(options.memory_budget >= 0 && options.memory_budget <= 1))
    throw Error("kiln::compile: memory_budget must be in [0, 1] (0: save the fewest bytes, 1: recompute "
                "nothing), got " + std::to_string(options.memory_budget));
}

std::string default_name(const Loc& loc) { return "function compiled at " + short_location(loc); }

}  // namespace kiln::compile_detail
