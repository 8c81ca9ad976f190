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
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // A graph input of this type (dims may be symbolic).
  Tensor input(const TensorType& type, const std::string& name);
  // The graph value for t: t's own if traced here, else t captured as a bound input.
  Value* value_of(const Tensor& t);
  std::vector<Tensor> record(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                             const Provenance& provenance);
  void set_outputs(const std::vector<Tensor>& outputs);

  Graph& graph() { return graph_; }
  const Device& device() const { return device_; }
  // Eager tensors captured by the trace, in the order of their graph inputs after the real ones.
  const std::vector<std::pair<Value*, Tensor>>& captured() const { return captured_; }
  const std::vector<ShapeGuard>& guards() const { return guards_; }

  void record(const ShapeGuard& guard) override { guards_.push_back(guard); }

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
};

// While alive, shape decisions on this thread go to the tracer's guard list.
class TracingScope {
 public:
  explicit TracingScope(Tracer& tracer) : guards_(&tracer) {}

 private:
  GuardSinkScope guards_;
};

}  // namespace kiln
