// KernelRunner: one op -> lowered steps -> cached programs -> launches.
#include "backends/kernel_runner.h"

#include <cstring>

#include "core/kernel/lower.h"
#include "core/support/error.h"

namespace kiln {

KernelRunner::KernelRunner(Backend& backend, kernel::Dialect dialect)
    : backend_(backend), dialect_(dialect) {}

KernelRunner::~KernelRunner() = default;

const Program& KernelRunner::program_for(const kernel::LoweredKernel& k) {
  kernel::EmitOptions options;
  options.dialect = dialect_;
  kernel::EmittedKernel emitted = kernel::emit(k.kernel, options);
  auto it = programs_.find(emitted.source);
  if (it != programs_.end()) return *it->second;
  ProgramSource source{k.kernel.name, dialect_ == kernel::Dialect::Glsl ? "glsl" : "cuda",
                       emitted.source};
  auto program = backend_.compile(source);
  const Program& ref = *program;
  programs_.emplace(emitted.source, std::move(program));
  return ref;
}

void KernelRunner::run(const OpRun& run) {
  std::lock_guard lock(mutex_);
  // Constants need no kernel: their bytes go straight to the output.
  if (run.kind == OpKind::Constant) {
    const Literal& lit = run.attrs.get_tensor("value");
    if (!lit.bytes.empty()) backend_.upload(*run.outputs[0].buffer, lit.bytes.data(), lit.bytes.size());
    return;
  }
  std::vector<TensorType> in_types, out_types;
  for (const BufferView& v : run.inputs) in_types.push_back({v.dtype, make_shape(v.dims)});
  for (const BufferView& v : run.outputs) out_types.push_back({v.dtype, make_shape(v.dims)});
  kernel::LoweredOp lowered = kernel::lower_op(run.kind, run.attrs, in_types, out_types);

  std::vector<Buffer*> args;
  for (const BufferView& v : run.inputs) args.push_back(v.buffer);
  for (const BufferView& v : run.outputs) args.push_back(v.buffer);
  std::vector<std::unique_ptr<Buffer>> temps;  // live until the launches finished (sync below)
  for (const TensorType& t : lowered.temps) {
    size_t bytes = size_t(numel(t.shape).value()) * dtype_size(t.dtype);
    temps.push_back(backend_.alloc(std::max<size_t>(bytes, 4)));
    args.push_back(temps.back().get());
  }
  if (!stream_) stream_ = backend_.create_stream();
  bool launched = false;
  for (const kernel::LoweredOp::Step& step : lowered.steps) {
    int64_t elements = step.kernel.elements();
    if (elements == 0) continue;
    const Program& program = program_for(step.kernel);
    Launch launch;
    launch.program = &program;
    for (int a : step.args) launch.buffers.push_back(args.at(size_t(a)));
    std::vector<int32_t> params = step.kernel.param_values();
    launch.push_constants.resize(params.size() * sizeof(int32_t));
    if (!params.empty()) std::memcpy(launch.push_constants.data(), params.data(), launch.push_constants.size());
    launch.groups = kernel::launch_groups(elements, kernel::EmitOptions{}.workgroup_size);
    stream_->launch(launch);
    launched = true;
  }
  if (launched) stream_->sync();
}

}  // namespace kiln
