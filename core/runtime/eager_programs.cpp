// EagerPrograms: one op -> (cached) one-node program's launches -> queued on the stream.
#include "core/runtime/eager_programs.h"

#include <algorithm>
#include <type_traits>

#include "core/ir/graph.h"
#include "core/ir/text.h"
#include "core/runtime/lowered_program.h"
#include "core/runtime/schedule.h"
#include "core/support/error.h"

namespace kiln {

struct EagerPrograms::Planned {
  struct OpLaunch {
    const CompiledKernel* program = nullptr;
    std::vector<int> args;  // slots: the op's inputs, then its outputs, then temp_bytes' buffers
    std::vector<uint8_t> push_constants;
    std::array<uint32_t, 3> groups{1, 1, 1};
    bool is_template = false;
  };
  std::vector<size_t> temp_bytes;
  std::vector<OpLaunch> launches;
};

namespace {

template <class T>
void append_raw(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Everything a plan depends on: op, attributes, dtypes and dims of every buffer. Built for each
// eager op, so it avoids text formatting for the common attribute kinds.
std::string op_signature(const OpRun& run) {
  std::string key;
  key.reserve(128);
  append_raw(key, run.kind);
  for (const auto& entry : run.attrs) {
    // Named, not a structured binding: clang cannot capture one in an OpenMP build.
    const Attr& attr = entry.second;
    key += entry.first;
    key += '=';
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, int64_t> || std::is_same_v<V, double> ||
                        std::is_same_v<V, bool> || std::is_same_v<V, DType>) {
            append_raw(key, v);
          } else if constexpr (std::is_same_v<V, std::string>) {
            key += v;
          } else if constexpr (std::is_same_v<V, std::vector<int64_t>> ||
                               std::is_same_v<V, std::vector<double>>) {
            key.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
          } else {
            key += print_attr(attr);
          }
        },
        attr);
    key += ';';
  }
  for (auto* views : {&run.inputs, &run.outputs}) {
    key += '|';
    for (const BufferView& v : *views) {
      append_raw(key, v.dtype);
      append_raw(key, uint32_t(v.dims.size()));
      key.append(reinterpret_cast<const char*>(v.dims.data()), v.dims.size() * sizeof(int64_t));
    }
  }
  return key;
}

// The op as a graph of one node: its inputs are the graph's inputs, its outputs the graph's outputs.
Graph one_node_graph(const OpRun& run) {
  Graph graph;
  std::vector<Value*> inputs;
  for (const BufferView& v : run.inputs) inputs.push_back(graph.add_input({v.dtype, make_shape(v.dims)}));
  std::vector<TensorType> output_types;
  for (const BufferView& v : run.outputs) output_types.push_back({v.dtype, make_shape(v.dims)});
  Node* node = graph.add_node_typed(run.kind, inputs, run.attrs, output_types, {});
  graph.set_outputs(node->outputs);
  return graph;
}

}  // namespace

EagerPrograms::EagerPrograms(Backend& backend, EagerOptions options)
    : backend_(backend), options_(std::move(options)), programs_(backend) {}

EagerPrograms::~EagerPrograms() {
  // The stream goes before the programs its launches use. Its destructor waits for the launches
  // submitted and drops those still queued rather than running them: nothing can read their
  // results any more, and at exit the driver may have torn down what running them needs (lavapipe
  // hung in vkWaitForFences after LLVM's static destructors had run).
  stream_.reset();
}

size_t EagerPrograms::programs_compiled() const {
  std::lock_guard lock(mutex_);
  return programs_.size();
}

EagerStats EagerPrograms::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

Stream& EagerPrograms::stream() {
  if (!stream_) {
    std::optional<kernel::CodegenTarget> target = backend_.codegen();
    if (!target) throw Error("eager programs: backend '" + backend_.name() + "' declares no code generation target");
    stream_ = backend_.create_stream();
    caps_ = backend_.caps();
    target_ = *target;
  }
  return *stream_;
}

// compile_graph's stages after the graph passes, on the op alone: the schedule, then the template
// it may take, else its kernel IR, emitted and compiled.
const EagerPrograms::Planned& EagerPrograms::plan(const OpRun& run) {
  std::string key = op_signature(run);
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;

  auto planned = std::make_unique<Planned>();
  const Graph graph = one_node_graph(run);
  const KernelSchedule schedule = schedule_kernels(graph, backend_, /*fuse=*/false, run.max_autotune);
  const bool template_candidate =
      !options_.generic_only && schedule.kernels.size() == 1 && schedule.kernels[0].template_candidate;
  std::optional<TemplateLaunch> chosen;
  if (template_candidate) chosen = options_.templates ? options_.templates(run, caps_) : backend_.plan_template(run);
  if (chosen) {
    Planned::OpLaunch op_launch;
    op_launch.program = &programs_.get({chosen->name, chosen->language, chosen->source},
                                       {chosen->name, chosen->language, chosen->source, 0, true});
    op_launch.args = chosen->args;
    op_launch.push_constants = std::move(chosen->push_constants);
    op_launch.groups = chosen->groups;
    op_launch.is_template = true;
    planned->launches.push_back(std::move(op_launch));
  } else {
    LoweredProgram program = lower_schedule(graph, schedule);
    emit_program(program, target_);
    // Value numbers to the run's slots: the op's inputs, its outputs, then scratch made per run.
    const size_t num_inputs = run.inputs.size(), num_outputs = run.outputs.size();
    std::vector<int> slot(program.values.size(), -1);
    for (size_t v = 0; v < program.values.size(); ++v) {
      const ProgramValue& value = program.values[v];
      if (value.alias_of >= 0) continue;
      if (value.storage == ValueStorage::Input) slot[v] = value.index;
      else if (value.storage == ValueStorage::Output) slot[v] = int(num_inputs) + value.index;
      else if (value.storage == ValueStorage::Arena) {
        slot[v] = int(num_inputs + num_outputs + planned->temp_bytes.size());
        planned->temp_bytes.push_back(
            std::max<size_t>(size_t(numel(value.type.shape).value()) * dtype_size(value.type.dtype), 4));
      }
    }
    for (size_t v = 0; v < program.values.size(); ++v)
      if (program.values[v].alias_of >= 0) slot[v] = slot[size_t(storage_value(program.values, int(v)))];
    for (const ProgramKernel& pk : program.kernels)
      for (const ProgramStep& s : pk.steps) {
        const int64_t elements = s.kernel.elements();
        if (elements == 0) continue;
        Planned::OpLaunch op_launch;
        op_launch.program = &programs_.get(s, program.language);
        for (int v : s.args) {
          if (slot.at(size_t(v)) < 0)
            throw Error("eager programs: internal error: " + std::string(op_name(run.kind)) +
                        "'s kernel binds a value that is neither an operand nor scratch");
          op_launch.args.push_back(slot[size_t(v)]);
        }
        op_launch.push_constants = push_constant_bytes(s.kernel.param_values());
        op_launch.groups = programs_.groups(op_launch.program, elements);
        planned->launches.push_back(std::move(op_launch));
      }
  }
  // Eager programs see a handful of shapes each; the cap only guards against unbounded growth.
  if (plans_.size() > 4096) plans_.clear();
  return *plans_.emplace(std::move(key), std::move(planned)).first->second;
}

void EagerPrograms::run(const OpRun& run) {
  // Constants need no kernel: their bytes go straight to the output (a fresh buffer, so no
  // queued launch can be using it).
  if (run.kind == OpKind::Constant) {
    const Literal& lit = run.attrs.get_tensor("value");
    if (!lit.bytes.empty()) backend_.upload(*run.outputs[0].buffer, lit.bytes.data(), lit.bytes.size());
    return;
  }
  std::lock_guard lock(mutex_);
  Stream& s = stream();
  const Planned& planned = plan(run);
  ++stats_.ops;
  if (planned.launches.empty()) return;

  std::vector<Buffer*> args;
  args.reserve(run.inputs.size() + run.outputs.size() + planned.temp_bytes.size());
  for (const BufferView& v : run.inputs) args.push_back(v.buffer);
  for (const BufferView& v : run.outputs) args.push_back(v.buffer);
  // Temps die at the end of this call; the stream keeps their memory until its launches finish.
  std::vector<std::unique_ptr<Buffer>> temps;
  for (size_t bytes : planned.temp_bytes) {
    temps.push_back(backend_.alloc(bytes));
    args.push_back(temps.back().get());
  }
  Launch launch;
  for (const Planned::OpLaunch& op_launch : planned.launches) {
    launch.program = op_launch.program;
    launch.buffers.clear();
    for (int a : op_launch.args) launch.buffers.push_back(args.at(size_t(a)));
    launch.push_constants = op_launch.push_constants;
    launch.groups = op_launch.groups;
    s.launch(launch);
    ++stats_.launches;
    if (op_launch.is_template) ++stats_.template_launches;
  }
  pending_ = true;
  if (options_.synchronous) {
    s.sync();
    pending_ = false;
    ++stats_.syncs;
  }
}

void EagerPrograms::sync() {
  std::lock_guard lock(mutex_);
  if (!pending_ || !stream_) return;
  stream_->sync();
  pending_ = false;
  ++stats_.syncs;
}

void run_on_backend(Backend& backend, const OpRun& run) {
  if (!backend.eager_compiles_kernels()) return backend.execute(run);
  EagerExecutor* executor = backend.eager_executor();
  if (!executor) executor = &backend.attach_eager_executor([&backend] { return std::make_unique<EagerPrograms>(backend); });
  executor->run(run);
}

}  // namespace kiln
