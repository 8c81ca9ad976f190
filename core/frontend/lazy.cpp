// Lazy mode: recorded segments between graph breaks, compiled once per structure.
#include "core/frontend/lazy.h"

#include "core/frontend/run_program.h"
#include "core/ir/text.h"
#include "core/passes/pass.h"
#include "core/runtime/compile_graph.h"
#include "core/support/log.h"

namespace kiln {

namespace {

thread_local LazySegments* t_lazy = nullptr;

class LazyScope {
 public:
  explicit LazyScope(LazySegments* lazy) : previous_(t_lazy) { t_lazy = lazy; }
  ~LazyScope() { t_lazy = previous_; }
  LazyScope(const LazyScope&) = delete;
  LazyScope& operator=(const LazyScope&) = delete;

 private:
  LazySegments* previous_;
};

}  // namespace

Tracer* lazy_tracer() {
  return t_lazy ? t_lazy->recording() : nullptr;
}

void flush_lazy() {
  if (t_lazy) t_lazy->flush();
}

LazySegments::LazySegments(Device device, ProgramOptions options)
    : device_(device), options_(options) {}

LazySegments::~LazySegments() = default;

Tracer* LazySegments::recording() {
  if (!tracer_) {
    tracer_ = std::make_unique<Tracer>(device_);
    tracer_->lazy = this;
  }
  return tracer_.get();
}

std::vector<Tensor> LazySegments::run(const std::function<std::vector<Tensor>()>& fn) {
  std::vector<Tensor> outputs;
  {
    LazyScope scope(this);
    try {
      outputs = fn();
    } catch (...) {
      tracer_.reset();  // a failed call leaves nothing half-recorded for the next one
      throw;
    }
  }
  flush();
  return outputs;
}

void LazySegments::flush() {
  if (!tracer_) return;
  LazyScope not_recording(nullptr);  // the program (the cpu interpreter runs ops) runs for real
  std::unique_ptr<Tracer> tracer = std::move(tracer_);  // ops from here on start a new segment
  std::vector<std::shared_ptr<TensorImpl>> live;
  std::vector<Value*> values;
  for (const std::weak_ptr<TensorImpl>& made : tracer->made()) {
    std::shared_ptr<TensorImpl> impl = made.lock();
    if (impl && impl->tracer == tracer.get()) {
      live.push_back(impl);
      values.push_back(impl->value);
    }
  }
  if (live.empty()) return;
  Graph& graph = tracer->graph();
  graph.set_outputs(values);
  std::string key = print_graph(graph, "segment");
  for (const auto& [value, tensor] : tracer->captured())
    key += "\n" + tensor.type().str() + " on " + tensor.device().name();
  std::unique_ptr<DeviceProgram>& program = programs_[key];
  if (!program) {
    Graph compiled = graph.clone();
    CompileGraphOptions graph_options;
    graph_options.program = options_;
    program = compile_graph(compiled, device_, graph_options).program;
    ++stats_.segments_compiled;
    log::debug("lazy mode: compiled a segment of " + std::to_string(graph.num_nodes()) +
               " ops into " + std::to_string(program->stats().kernels) + " kernels");
  }
  std::vector<Tensor> args;
  for (const auto& [value, tensor] : tracer->captured()) args.push_back(tensor);
  std::vector<Tensor> outputs = run_program(*program, args);
  ++stats_.segment_runs;
  last_program_ = &program->stats();
  for (size_t i = 0; i < live.size(); ++i) {
    const TensorImpl& result = outputs[i].impl();
    TensorImpl& impl = *live[i];
    impl.buffer = result.buffer;
    impl.device = result.device;
    impl.type = result.type;
    impl.value = nullptr;
    impl.tracer = nullptr;
  }
}

}  // namespace kiln
