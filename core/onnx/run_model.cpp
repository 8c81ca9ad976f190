// Host tensors <-> literals, and running an imported model on a device with the interpreter.
#include <cstring>

#include "core/frontend/factories.h"
#include "core/onnx/onnx_import.h"
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

std::vector<Tensor> run_model(const ImportedModel& model, const std::vector<Tensor>& inputs,
                              Device device) {
  if (inputs.size() != model.inputs.size())
    throw Error("run_model: the model has " + std::to_string(model.inputs.size()) + " inputs, " +
                std::to_string(inputs.size()) + " were given");
  std::vector<Tensor> args;
  for (const Tensor& t : inputs) args.push_back(t.to(device));
  for (const Tensor& t : model.captured) args.push_back(t.to(device));
  // The interpreter runs input-less nodes (constants) on cpu; bind them as device inputs instead.
  bool has_constants = false;
  for (const Node* n : model.graph.nodes()) has_constants = has_constants || n->kind == OpKind::Constant;
  if (!has_constants) return interpret(model.graph, args);
  Graph graph = model.graph.clone();
  for (Node* n : graph.nodes()) {
    if (n->kind != OpKind::Constant) continue;
    Value* out = n->output();
    args.push_back(literal_to_tensor(n->attrs.get_tensor("value"), device));
    graph.replace_uses(out, graph.add_input(out->type, out->name));
  }
  graph.remove_dead_nodes();
  return interpret(graph, args);
}

}  // namespace kiln::onnx
