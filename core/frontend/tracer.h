// Tracer: records op calls into a Graph instead of running them. Tensors created by input() stand
// for graph inputs; eager tensors an op meets (module parameters, constants) are captured as
// extra inputs bound to that tensor. Shape decisions on symbolic dims are kept as guards.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/graph.h"

namespace kiln {

class LazySegments;

class Tracer : public GuardSink {
 public:
  explicit Tracer(Device device);
  // Gives back the gradients write_grad replaced during the trace: the program's write-backs set
  // them when it runs.
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // A graph input of this type (dims may be symbolic).
  Tensor input(const TensorType& type, const std::string& name);
  // The graph value for t: t's own if traced here, else t captured as a bound input.
  Value* value_of(const Tensor& t);
  std::vector<Tensor> record(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                             const Provenance& provenance);
  void set_outputs(const std::vector<Tensor>& outputs);

  // Training steps traced whole: an optimizer's update of eager tensor `target` (a parameter, its
  // state), or a backward's (or zero_grad's) new gradient for it, applied to `target` after the
  // program runs (writes-back), as the graph's extra outputs. Later reads of `target` in the
  // trace see `value`. An undefined gradient clears it.
  struct Write {
    Tensor target;
    Value* value = nullptr;  // null: a cleared gradient
    bool grad = false;
  };
  void write(const Tensor& target, const Tensor& value);
  void write_grad(const Tensor& target, const Tensor& grad);
  const std::vector<Write>& writes() const { return writes_; }
  // Whether this trace already wrote `target`'s gradient (then the trace, not the call, decides
  // what a backward adds to).
  bool wrote_grad(const Tensor& target) const;
  // A backward in the trace adds to the gradient `target` has when the call starts, as eagerly:
  // whether that gradient is defined decides the graph, so the compiled entry guards it, and a
  // defined one is read at each call.
  struct GradStart {
    Tensor target;
    bool defined = false;
  };
  void record_grad_start(const Tensor& target, bool defined) { grad_starts_.push_back({target, defined}); }
  const std::vector<GradStart>& grad_starts() const { return grad_starts_; }
  // Binds eager tensor t as a graph input (what value_of does the first time t is read).
  Value* captured_input(const Tensor& t);
  // A traced tensor standing for `value`, a value of this trace (a gradient the trace built).
  Tensor tensor_of(Value* value);

  Graph& graph() { return graph_; }
  const Device& device() const { return device_; }
  // Eager tensors captured by the trace, in the order of their graph inputs after the real ones.
  const std::vector<std::pair<Value*, Tensor>>& captured() const { return captured_; }
  const std::vector<ShapeGuard>& guards() const { return guards_; }

  void record(const ShapeGuard& guard) override { guards_.push_back(guard); }

  // Set when this tracer records a while_loop's subgraph (it is then the compiling_tracer()): every
  // op with inputs records into it, and values of the enclosing traces it reads become its captured
  // inputs, as eager tensors do.
  bool captures_traced = false;

  // Set when this tracer records a lazy segment (core/frontend/lazy.h): reading a recorded
  // tensor's data then flushes the segment instead of breaking the graph.
  LazySegments* lazy = nullptr;
  // Lazy segments only: every tensor record() made, to find the ones still alive at a flush.
  const std::vector<std::weak_ptr<TensorImpl>>& made() const { return made_; }

 private:
  Device device_;
  Graph graph_;
  std::vector<std::pair<Value*, Tensor>> captured_;
  std::vector<ShapeGuard> guards_;
  std::vector<std::weak_ptr<TensorImpl>> made_;
  std::vector<Write> writes_;
  std::vector<std::pair<Tensor, std::shared_ptr<TensorImpl>>> grads_before_;
  std::vector<GradStart> grad_starts_;
};

// The tracer of the compiled function being traced on this thread (not a lazy segment's), or null:
// what zero_grad() reports a cleared gradient to.
Tracer* compiling_tracer();

// While alive, `tracer` is this thread's compiling_tracer().
class CompilingScope {
 public:
  explicit CompilingScope(Tracer& tracer);
  ~CompilingScope();
  CompilingScope(const CompilingScope&) = delete;
  CompilingScope& operator=(const CompilingScope&) = delete;

 private:
  Tracer* previous_;
};

// While alive, shape decisions on this thread go to the tracer's guard list.
class TracingScope {
 public:
  explicit TracingScope(Tracer& tracer) : guards_(&tracer) {}

 private:
  GuardSinkScope guards_;
};

}  // namespace kiln
