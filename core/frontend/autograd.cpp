// Eager autograd: recording, the backward graph built from the records, and the Tensor methods.
#include "core/frontend/autograd.h"

#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "core/autodiff/reverse.h"
#include "core/frontend/dispatch.h"
#include "core/frontend/run_program.h"
#include "core/frontend/tracer.h"
#include "core/ir/text.h"
#include "core/runtime/compile_graph.h"

namespace kiln {
namespace {

thread_local bool t_grad_enabled = true;

// Moves out the nodes that only `node`'s inputs keep alive, so releasing the inputs releases no
// node; the caller releases those nodes one at a time.
void take_sole_inputs(AutogradNode& node, std::vector<std::shared_ptr<AutogradNode>>& out) {
  for (Tensor& t : node.inputs) {
    const std::shared_ptr<TensorImpl>& impl = t.impl_ptr();
    if (impl && impl.use_count() == 1 && impl->grad_fn && impl->grad_fn.use_count() == 1)
      out.push_back(std::move(impl->grad_fn));
  }
  node.inputs.clear();
}

Tensor saved_tensor(const TensorType& type, const std::shared_ptr<Buffer>& buffer, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->type = type;
  impl->device = device;
  impl->buffer = buffer;
  return Tensor(std::move(impl));
}

// The recorded ops behind some tensors, as a Graph whose inputs are the leaves and other tensors
// the ops read (bound[i] binds input i).
class RecordedGraph {
 public:
  Value* value_of(const Tensor& t) {
    const TensorImpl& impl = t.impl();
    if (impl.grad_fn) {
      build(impl.grad_fn.get());
      return outputs_.at(impl.grad_fn.get()).at(size_t(impl.grad_fn_output));
    }
    auto it = inputs_.find(&impl);
    if (it != inputs_.end()) return it->second;
    Value* v = graph_.add_input(impl.type);
    inputs_.emplace(&impl, v);
    bound_.push_back(t);
    return v;
  }
  // After differentiation: every forward value becomes an input bound to its saved data, so the
  // gradient graph reads what the forward ops computed instead of computing it again.
  void bind_forward_values() {
    std::unordered_map<const Value*, Value*> replacements;
    for (const AutogradNode* n : order_) {
      const std::vector<Value*>& outs = outputs_.at(n);
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!outs[k]->producer) continue;  // a compiled function that returns an input as is
        Value* in = graph_.add_input(outs[k]->type);
        bound_.push_back(saved_tensor(n->output_types[k], n->outputs[k], n->device));
        replacements[outs[k]] = in;
      }
      if (!n->graph) continue;
      const std::vector<Value*>& inlined = saved_.at(n);
      for (size_t k = 0; k < inlined.size(); ++k) {
        Value* in = graph_.add_input(inlined[k]->type);
        bound_.push_back(saved_tensor(n->saved_values[k]->type, n->saved_buffers[k], n->device));
        replacements[inlined[k]] = in;
      }
    }
    graph_.replace_uses(replacements);
  }
  Graph& graph() { return graph_; }
  const std::vector<Tensor>& bound() const { return bound_; }
  bool has_compiled_calls() const { return !saved_.empty(); }  // a compiled function's graph inlined

 private:
  // Post-order without recursion: recorded chains can be longer than the stack is deep.
  void build(const AutogradNode* root) {
    std::vector<std::pair<const AutogradNode*, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (outputs_.count(n)) {
        stack.pop_back();
        continue;
      }
      if (next < n->inputs.size()) {
        const TensorImpl& in = n->inputs[next++].impl();
        if (in.grad_fn && !outputs_.count(in.grad_fn.get())) stack.push_back({in.grad_fn.get(), 0});
        continue;
      }
      std::vector<Value*> ins;
      for (const Tensor& t : n->inputs) ins.push_back(value_of(t));
      outputs_[n] = n->graph ? inline_graph(*n, ins)
                             : graph_.add_node_typed(n->kind, ins, n->attrs, n->output_types, n->where)->outputs;
      order_.push_back(n);
      stack.pop_back();
    }
  }

  // A compiled call's graph added with its inputs bound to `ins`; returns the values of its
  // outputs and keeps those of its saved values.
  std::vector<Value*> inline_graph(const AutogradNode& call, const std::vector<Value*>& ins) {
    const Graph& sub = *call.graph;
    std::map<const Value*, Value*> to;
    for (size_t i = 0; i < sub.inputs().size(); ++i) to[sub.inputs()[i]] = ins.at(i);
    for (const Node* node : sub.nodes()) {
      std::vector<Value*> node_ins;
      for (const Value* v : node->inputs) node_ins.push_back(to.at(v));
      std::vector<TensorType> types;
      for (const Value* v : node->outputs) types.push_back(v->type);
      Node* copy = graph_.add_node_typed(node->kind, node_ins, node->attrs, types, node->provenance);
      for (size_t k = 0; k < node->outputs.size(); ++k) to[node->outputs[k]] = copy->outputs[k];
    }
    std::vector<Value*>& saved = saved_[&call];
    for (const Value* v : call.saved_values) saved.push_back(to.at(v));
    std::vector<Value*> outs;
    for (const Value* v : sub.outputs()) outs.push_back(to.at(v));
    return outs;
  }

  Graph graph_;
  std::map<const TensorImpl*, Value*> inputs_;
  std::map<const AutogradNode*, std::vector<Value*>> outputs_;  // each recorded node's values
  std::map<const AutogradNode*, std::vector<Value*>> saved_;    // a compiled call's saved values
  std::vector<const AutogradNode*> order_;
  std::vector<Tensor> bound_;
};

// The gradient program for a graph structure on a device, built on first use: compiled, or the
// graph passes and the node-by-node interpreter where `interpret` says so. The cache is per
// thread: thread_local objects are destroyed at exit before the backends close (their atexit
// handlers run after), so no program outlives the device it runs on. Only the program that ran last
// keeps its intermediates (its arena) between runs: a training loop's one backward reuses its arena
// at every step, while the arenas of backwards that ran before are freed, as a compiled function
// holds one program's arena at a time.
std::vector<Tensor> run_gradient_graph(Graph& graph, const std::vector<Tensor>& inputs, Device device,
                                       bool interpret) {
  thread_local std::map<std::string, std::unique_ptr<DeviceProgram>> programs;
  thread_local DeviceProgram* last_run = nullptr;
  std::string key = print_graph(graph) + "\n" + device.name() + (interpret ? "\ninterpreted" : "");
  for (const Tensor& t : inputs) key += "\n" + t.type().str();
  auto it = programs.find(key);
  if (it == programs.end()) {
    if (programs.size() >= 1024) {  // a cap against unbounded growth
      programs.clear();
      last_run = nullptr;
    }
    CompileGraphOptions options;
    options.interpret = interpret;
    it = programs.emplace(key, compile_graph(graph, device, options).program).first;
  }
  DeviceProgram& program = *it->second;
  if (last_run && last_run != &program) last_run->release_intermediates();
  last_run = &program;
  NoGradGuard no_grad;
  return run_program(program, inputs);
}

// Gradients of the roots (seeded) with respect to `wrt`, or to every leaf reached that requires
// grad when `wrt` is empty (then `leaves` receives them).
std::vector<Tensor> differentiate(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                                  const std::vector<Tensor>& wrt, std::vector<Tensor>* leaves) {
  RecordedGraph recorded;
  GradientRequest request;
  for (const Tensor& r : roots) request.outputs.push_back(recorded.value_of(r));
  for (const Tensor& s : seeds) request.seeds.push_back(s.defined() ? recorded.value_of(s.detach()) : nullptr);
  if (!wrt.empty()) {
    for (const Tensor& w : wrt) request.wrt.push_back(recorded.value_of(w));
  } else {
    for (size_t i = 0; i < recorded.bound().size(); ++i) {
      const Tensor& t = recorded.bound()[i];
      if (t.impl().requires_grad && !t.impl().grad_fn) {
        request.wrt.push_back(recorded.graph().inputs()[i]);
        leaves->push_back(t);
      }
    }
  }
  if (request.wrt.empty()) return {};
  std::vector<Value*> grads = add_gradients(recorded.graph(), request);
  recorded.bind_forward_values();
  recorded.graph().set_outputs(grads);
  recorded.graph().remove_dead_nodes();
  // Eager ops' gradients run as the device runs eager ops: compiled where its eager ops are compiled
  // (GPU backends), node by node on precompiled kernels elsewhere (cpu), so that no backward waits
  // on a compiler. A compiled function's backward is always compiled.
  const Device device = roots[0].device();
  const char* mode = std::getenv("KILN_EAGER_BACKWARD");  // "compiled": compiled everywhere, for comparisons
  const bool always_compiled = mode && std::string(mode) == "compiled";
  const bool interpret =
      !always_compiled && !recorded.has_compiled_calls() && !device.backend().eager_compiles_kernels();
  return run_gradient_graph(recorded.graph(), recorded.bound(), device, interpret);
}

// backward() inside a compiled function: the gradients join the trace. Every captured tensor that
// requires grad and that the loss depends on gets its gradient as a traced value, written to its
// grad() after the program runs (so the optimizer in the same function reads it).
void backward_in_trace(const Tensor& loss, const Tensor& gradient) {
  Tracer& tracer = *loss.impl().tracer;
  Graph& graph = tracer.graph();
  std::set<const Value*> upstream;  // what the loss depends on
  std::vector<const Value*> work = {loss.impl().value};
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (!upstream.insert(v).second || !v->producer) continue;
    for (const Value* in : v->producer->inputs) work.push_back(in);
  }
  GradientRequest request;
  request.outputs = {loss.impl().value};
  request.seeds = {gradient.defined() ? tracer.value_of(gradient) : nullptr};
  std::vector<Tensor> leaves;
  for (const auto& [value, tensor] : tracer.captured())
    if (tensor.requires_grad() && upstream.count(value)) {
      request.wrt.push_back(value);
      leaves.push_back(tensor);
    }
  if (leaves.empty())
    throw Error("in a compiled function: no tensor the loss depends on requires grad (parameters "
                "reached through module arguments or captures do)");
  std::vector<Value*> grads = add_gradients(graph, request);
  for (size_t i = 0; i < leaves.size(); ++i) {
    Tensor g = tracer.tensor_of(grads[i]);
    Tensor before = leaves[i].grad();
    if (!tracer.wrote_grad(leaves[i])) tracer.record_grad_start(leaves[i], before.defined());
    if (before.defined()) g = before + g;  // an eager gradient from before the call is captured
    tracer.write_grad(leaves[i], g);
    leaves[i].impl().grad = g.impl_ptr();
  }
}

void check_differentiable(const Tensor& t, const char* what, const Loc& loc) {
  if (!t.defined()) throw Error(std::string(what) + " at " + short_location(loc) + ": the tensor is undefined");
  if (t.is_traced())
    throw Error(std::string(what) + " at " + short_location(loc) +
                ": inside a compiled function only backward() is supported (kiln::grad is not yet)");
  if (!t.requires_grad())
    throw Error(std::string(what) + " at " + short_location(loc) + ": the " + t.type().str() +
                " tensor does not require grad; no input of the ops that made it does (mark a leaf "
                "with requires_grad_())");
}

}  // namespace

AutogradNode::~AutogradNode() {
  std::vector<std::shared_ptr<AutogradNode>> pending;
  take_sole_inputs(*this, pending);
  while (!pending.empty()) {
    std::shared_ptr<AutogradNode> node = std::move(pending.back());
    pending.pop_back();
    take_sole_inputs(*node, pending);
  }  // each node dies here with no inputs left, so its own destructor does not recurse
}

bool grad_mode_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : before_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = before_; }

void record_for_autograd(OpKind kind, const AttrMap& attrs, const Provenance& where,
                         const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  if (!t_grad_enabled) return;
  bool any = false;
  for (const Tensor& t : inputs) any = any || t.impl().requires_grad;
  if (!any || op_def(kind).gradient == Gradient::None) return;
  auto node = std::make_shared<AutogradNode>();
  node->kind = kind;
  node->attrs = attrs;
  node->where = where;
  node->inputs = inputs;
  node->device = outputs.empty() ? inputs[0].device() : outputs[0].device();
  for (const Tensor& out : outputs) {
    node->output_types.push_back(out.type());
    node->outputs.push_back(out.impl().buffer);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    TensorImpl& impl = outputs[k].impl();
    if (!is_floating(impl.type.dtype)) continue;
    impl.requires_grad = true;
    impl.grad_fn = node;
    impl.grad_fn_output = int(k);
  }
}

void record_compiled_call(std::shared_ptr<const Graph> graph, const std::vector<Tensor>& inputs,
                          std::vector<Tensor>& outputs, const std::vector<std::pair<const Value*, Tensor>>& saved) {
  if (!t_grad_enabled) return;
  bool any = false;
  for (const Tensor& t : inputs) any = any || t.impl().requires_grad;
  if (!any) return;
  if (graph->inputs().size() != inputs.size() || graph->outputs().size() != outputs.size())
    throw Error("kiln::compile: the graph recorded for autograd has " + std::to_string(graph->inputs().size()) +
                " inputs and " + std::to_string(graph->outputs().size()) + " outputs, the call " +
                std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  auto node = std::make_shared<AutogradNode>();
  node->graph = std::move(graph);
  node->where = node->graph->outputs().empty() || !node->graph->outputs()[0]->producer
                    ? Provenance{}
                    : node->graph->outputs()[0]->producer->provenance;
  node->inputs = inputs;
  node->device = inputs[0].device();
  for (const auto& [value, tensor] : saved) {
    node->saved_values.push_back(value);
    node->saved_buffers.push_back(tensor.impl().buffer);
  }
  for (const Tensor& out : outputs) {
    node->output_types.push_back(out.type());
    node->outputs.push_back(out.impl().buffer);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    TensorImpl& impl = outputs[k].impl();
    bool is_input = false;  // a function that returns an argument as is returns that tensor
    for (const Tensor& t : inputs) is_input = is_input || &t.impl() == &impl;
    if (is_input || !is_floating(impl.type.dtype)) continue;
    impl.requires_grad = true;
    impl.grad_fn = node;
    impl.grad_fn_output = int(k);
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, Loc loc) {
  if (outputs.empty()) throw Error("kiln::grad at " + short_location(loc) + ": no outputs to differentiate");
  for (const Tensor& o : outputs) check_differentiable(o, "kiln::grad", loc);
  for (const Tensor& i : inputs)
    if (!i.defined() || !i.requires_grad())
      throw Error("kiln::grad at " + short_location(loc) + ": an input " +
                  (i.defined() ? i.type().str() : std::string("(undefined)")) + " does not require grad");
  if (inputs.empty()) return {};
  try {
    return differentiate(outputs, {}, inputs, nullptr);
  } catch (const Error& e) {
    throw Error("kiln::grad at " + short_location(loc) + ": " + e.what());
  }
}

Tensor& Tensor::requires_grad_(bool requires_grad, Loc loc) {
  TensorImpl& i = impl();
  if (i.value)
    throw Error("requires_grad_() at " + short_location(loc) + " on a traced tensor: mark it before compiling");
  if (requires_grad && !is_floating(i.type.dtype))
    throw Error("requires_grad_() at " + short_location(loc) + ": only floating-point tensors can require "
                "gradients, this one is " + i.type.str());
  if (!requires_grad && i.grad_fn)
    throw Error("requires_grad_(false) at " + short_location(loc) + ": the tensor is the result of an op "
                "that recorded its gradient; use detach() for a copy without history");
  i.requires_grad = requires_grad;
  return *this;
}

bool Tensor::requires_grad() const { return impl().requires_grad; }

Tensor Tensor::grad() const {
  const TensorImpl& i = impl();
  return i.grad ? Tensor(i.grad) : Tensor();
}

Tensor Tensor::detach() const {
  const TensorImpl& i = impl();
  auto impl = std::make_shared<TensorImpl>();
  impl->type = i.type;
  impl->device = i.device;
  impl->buffer = i.buffer;
  impl->value = i.value;
  impl->tracer = i.tracer;
  return Tensor(std::move(impl));
}

void Tensor::backward(Loc loc) const { backward(Tensor(), loc); }

void Tensor::backward(const Tensor& gradient, Loc loc) const {
  if (is_traced() && !impl().tracer->lazy) {  // a training step compiled whole
    if (!gradient.defined() && numel() != 1)
      throw Error("backward() at " + short_location(loc) + ": the tensor is " + type().str() +
                  "; a tensor of more than one element needs backward(gradient) with a gradient of its shape");
    try {
      backward_in_trace(*this, gradient);
    } catch (const Error& e) {
      throw Error("backward() at " + short_location(loc) + ": " + e.what());
    }
    return;
  }
  check_differentiable(*this, "backward()", loc);
  if (!gradient.defined() && numel() != 1)
    throw Error("backward() at " + short_location(loc) + ": the tensor is " + type().str() +
                "; a tensor of more than one element needs backward(gradient) with a gradient of its shape");
  if (gradient.defined() && (gradient.type().str() != type().str() || gradient.device() != device()))
    throw Error("backward(gradient) at " + short_location(loc) + ": the gradient is " + gradient.type().str() +
                " on " + gradient.device().name() + ", the tensor " + type().str() + " on " + device().name());
  std::vector<Tensor> leaves, grads;
  try {
    grads = differentiate({*this}, {gradient}, {}, &leaves);
  } catch (const Error& e) {
    throw Error("backward() at " + short_location(loc) + ": " + e.what());
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < leaves.size(); ++i) {
    TensorImpl& leaf = leaves[i].impl();
    Tensor sum = leaf.grad ? Tensor(leaf.grad) + grads[i] : grads[i];
    leaf.grad = sum.impl_ptr();
  }
}

}  // namespace kiln
