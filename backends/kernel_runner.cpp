// KernelRunner: one op -> (cached) plan of launches -> queued on the stream; sync on demand.
#include "backends/kernel_runner.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/ir/text.h"
#include "core/kernel/lower.h"
#include "core/support/error.h"

namespace kiln {

struct KernelRunner::Planned {
  struct Step {
    const Program* program = nullptr;
    std::vector<int> args;
    std::vector<uint8_t> push_constants;
    std::array<uint32_t, 3> groups{1, 1, 1};
    bool is_template = false;
  };
  std::vector<size_t> temp_bytes;
  std::vector<Step> steps;
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

}  // namespace

KernelRunner::KernelRunner(Backend& backend, KernelRunnerOptions options)
    : backend_(backend), options_(std::move(options)) {}

KernelRunner::~KernelRunner() {
  // The stream goes before the programs its launches use. Its destructor waits for the launches
  // submitted and drops those still queued rather than running them: nothing can read their
  // results any more, and at exit the driver may have torn down what running them needs (lavapipe
  // hung in vkWaitForFences after LLVM's static destructors had run).
  stream_.reset();
}

size_t KernelRunner::programs_compiled() const {
  std::lock_guard lock(mutex_);
  return programs_.size();
}

KernelRunnerStats KernelRunner::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

Stream& KernelRunner::stream() {
  if (!stream_) {
    std::optional<kernel::CodegenTarget> target = backend_.codegen();
    if (!target) throw Error("KernelRunner: backend '" + backend_.name() + "' declares no code generation target");
    stream_ = backend_.create_stream();
    caps_ = backend_.caps();
    target_ = *target;
  }
  return *stream_;
}

const Program& KernelRunner::program_for(const std::string& name, const std::string& source,
                                         const std::string& language) {
  auto it = programs_.find(source);
  if (it != programs_.end()) return *it->second;
  ProgramSource program_source{name, language, source};
  auto program = backend_.compile(program_source);
  const Program& ref = *program;
  programs_.emplace(source, std::move(program));
  return ref;
}

const KernelRunner::Planned& KernelRunner::plan(const OpRun& run) {
  std::string key = op_signature(run);
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;

  auto planned = std::make_unique<Planned>();
  std::optional<TemplateLaunch> chosen;
  if (options_.templates) chosen = options_.templates(run, caps_);
  if (chosen) {
    Planned::Step step;
    step.program = &program_for(chosen->name, chosen->source, chosen->language);
    step.args = chosen->args;
    step.push_constants = std::move(chosen->push_constants);
    step.groups = chosen->groups;
    step.is_template = true;
    planned->steps.push_back(std::move(step));
  } else {
    std::vector<TensorType> in_types, out_types;
    for (const BufferView& v : run.inputs) in_types.push_back({v.dtype, make_shape(v.dims)});
    for (const BufferView& v : run.outputs) out_types.push_back({v.dtype, make_shape(v.dims)});
    kernel::LoweredOp lowered = kernel::lower_op(run.kind, run.attrs, in_types, out_types);
    for (const TensorType& t : lowered.temps)
      planned->temp_bytes.push_back(
          std::max<size_t>(size_t(numel(t.shape).value()) * dtype_size(t.dtype), 4));
    kernel::EmitOptions emit_options = kernel::emit_options_for(target_);
    for (const kernel::LoweredOp::Step& s : lowered.steps) {
      int64_t elements = s.kernel.elements();
      if (elements == 0) continue;
      if (target_.dialect != kernel::Dialect::Cpp)  // C++ would print them: one source per shape
        emit_options.static_params = s.kernel.static_param_values();
      kernel::EmittedKernel emitted = kernel::emit(s.kernel.kernel, emit_options);
      Planned::Step step;
      step.program = &program_for(s.kernel.kernel.name, emitted.source, kernel::language_of(target_.dialect));
      step.args = s.args;
      std::vector<int32_t> params = s.kernel.param_values();
      step.push_constants.resize(params.size() * sizeof(int32_t));
      if (!params.empty())
        std::memcpy(step.push_constants.data(), params.data(), step.push_constants.size());
      step.groups = kernel::launch_groups(emitted, elements);
      planned->steps.push_back(std::move(step));
    }
  }
  // Eager programs see a handful of shapes each; the cap only guards against unbounded growth.
  if (plans_.size() > 4096) plans_.clear();
  return *plans_.emplace(std::move(key), std::move(planned)).first->second;
}

void KernelRunner::run(const OpRun& run) {
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
  if (planned.steps.empty()) return;

  std::vector<Buffer*> args;
  for (const BufferView& v : run.inputs) args.push_back(v.buffer);
  for (const BufferView& v : run.outputs) args.push_back(v.buffer);
  // Temps die at the end of this call; the stream keeps their memory until its launches finish.
  std::vector<std::unique_ptr<Buffer>> temps;
  for (size_t bytes : planned.temp_bytes) {
    temps.push_back(backend_.alloc(bytes));
    args.push_back(temps.back().get());
  }
  Launch launch;
  for (const Planned::Step& step : planned.steps) {
    launch.program = step.program;
    launch.buffers.clear();
    for (int a : step.args) launch.buffers.push_back(args.at(size_t(a)));
    launch.push_constants = step.push_constants;
    launch.groups = step.groups;
    s.launch(launch);
    ++stats_.launches;
    if (step.is_template) ++stats_.template_launches;
  }
  pending_ = true;
  if (options_.synchronous) {
    s.sync();
    pending_ = false;
    ++stats_.syncs;
  }
}

void KernelRunner::sync() {
  std::lock_guard lock(mutex_);
  if (!pending_ || !stream_) return;
  stream_->sync();
  pending_ = false;
  ++stats_.syncs;
}

}  // namespace kiln
