// Host tensors <-> literals, and running an imported model on a device: interpreted (EagerModel)
// or compiled (CompiledModel).
#include <cstring>

#include "core/frontend/factories.h"
#include "core/onnx/onnx_import.h"
#include "core/runtime/compile_graph.h"
#include "core/runtime/interpreter.h"

namespace kiln::onnx {

Tensor literal_to_tensor(const Literal& literal, Device device) {
  return from_bytes(literal.bytes.data(), literal.dtype, Dims(literal.shape), device);
}

Literal tensor_to_literal(const Tensor& tensor) {
  Literal lit;
  lit.dtype = tensor.dtype();
  lit.shape = tensor.sizes();
  lit.bytes.resize(size_t(tensor.numel()) * dtype_size(lit.dtype));
  if (lit.bytes.empty()) return lit;
  visit_dtype(lit.dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> v = tensor.to_vector<uint8_t>();
      std::memcpy(lit.bytes.data(), v.data(), v.size());
    } else {
      std::vector<T> v = tensor.to_vector<T>();
      std::memcpy(lit.bytes.data(), v.data(), lit.bytes.size());
    }
  });
  return lit;
}

EagerModel::EagerModel(const ImportedModel& model, Device device)
    : device_(device), num_inputs_(model.inputs.size()), graph_(model.graph.clone()) {
  for (const Tensor& t : model.captured) bound_.push_back(t.to(device));
  // The interpreter runs input-less nodes (constants) on cpu; bind them as device inputs instead.
  for (Node* n : graph_.nodes()) {
    if (n->kind != OpKind::Constant) continue;
    Value* out = n->output();
    bound_.push_back(literal_to_tensor(n->attrs.get_tensor("value"), device));
    graph_.replace_uses(out, graph_.add_input(out->type, out->name));
  }
  graph_.remove_dead_nodes();
}

std::vector<Tensor> EagerModel::run(const std::vector<Tensor>& inputs) {
  if (inputs.size() != num_inputs_)
    throw Error("EagerModel::run: the model has " + std::to_string(num_inputs_) + " inputs, " +
                std::to_string(inputs.size()) + " were given");
  std::vector<Tensor> args;
  for (const Tensor& t : inputs) args.push_back(t.to(device_));
  args.insert(args.end(), bound_.begin(), bound_.end());
  return interpret(graph_, args);
}

std::vector<Tensor> run_model(const ImportedModel& model, const std::vector<Tensor>& inputs,
                              Device device) {
  return EagerModel(model, device).run(inputs);
}

CompiledModel::CompiledModel(const ImportedModel& model, Device device, const ProgramOptions& options,
                             const PipelineOptions& pipeline)
    : device_(device), num_inputs_(model.inputs.size()), graph_(model.graph.clone()) {
  for (const Tensor& t : model.captured) weights_.push_back(t.to(device));
  CompiledGraph compiled = compile_graph(graph_, device, {pipeline, options});
  passes_ = std::move(compiled.passes);
  program_ = std::move(compiled.program);
}

std::vector<Tensor> CompiledModel::bind(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != num_inputs_)
    throw Error("CompiledModel::run: the model has " + std::to_string(num_inputs_) + " inputs, " +
                std::to_string(inputs.size()) + " were given");
  std::vector<Tensor> args;
  for (const Tensor& t : inputs) args.push_back(t.to(device_));
  args.insert(args.end(), weights_.begin(), weights_.end());
  return args;
}

std::vector<Tensor> CompiledModel::run(const std::vector<Tensor>& inputs) {
  return program_->run(bind(inputs));
}

}  // namespace kiln::onnx
