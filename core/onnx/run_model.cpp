// Host tensors <-> literals, and running an imported model on a device: interpreted (EagerModel)
// or compiled (CompiledModel).
#include <cstring>
#include <map>
#include <set>

#include "core/frontend/factories.h"
#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/onnx/import_context.h"
#include "core/onnx/onnx_import.h"
#include "core/runtime/compile_graph.h"

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

namespace {

// The inputs against the model's declared types, as onnxruntime checks them before a run: their
// count, then each one's dtype, rank and static dims, and one size per dim symbol. Each message
// names the input.
void check_model_inputs(const char* who, const std::vector<ModelIO>& declared,
                        const std::vector<Tensor>& inputs) {
  if (inputs.size() != declared.size())
    throw Error(std::string(who) + ": the model has " + std::to_string(declared.size()) +
                (declared.size() == 1 ? " input, " : " inputs, ") + std::to_string(inputs.size()) +
                (inputs.size() == 1 ? " was given" : " were given"));
  std::map<std::string, std::pair<int64_t, std::string>> symbols;  // size, and the input it came from
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = declared[i].type;
    const std::string name = "input " + std::to_string(i) + " '" + declared[i].name + "'";
    const TensorType got = inputs[i].type();
    if (got.dtype != want.dtype || got.rank() != want.rank())
      throw Error(std::string(who) + ": " + name + " should be " + want.str() + ", got " + got.str());
    for (size_t d = 0; d < want.rank(); ++d) {
      const int64_t size = got.shape[d].value();
      if (want.shape[d].is_static()) {
        if (want.shape[d].value() != size)
          throw Error(std::string(who) + ": " + name + " should be " + want.str() + ", got " + got.str() +
                      ": dim " + std::to_string(d) + " is " + std::to_string(size) + ", not " +
                      std::to_string(want.shape[d].value()));
        continue;
      }
      const std::string symbol = want.shape[d].str();
      auto [it, first] = symbols.emplace(symbol, std::pair{size, declared[i].name});
      if (!first && it->second.first != size)
        throw Error(std::string(who) + ": " + name + " has " + symbol + " = " + std::to_string(size) +
                    " in dim " + std::to_string(d) + ", but input '" + it->second.second + "' has " +
                    symbol + " = " + std::to_string(it->second.first) +
                    "; every input must give one size to a dim symbol");
    }
  }
}

std::string guard_text(const ShapeGuard& g) {
  return g.lhs.str() + " " + guard_op_text(g.op) + " " + g.rhs.str();
}

}  // namespace

void check_import_guards(const std::vector<ModelIO>& model_inputs,
                         const std::vector<ImportGuard>& guards, const std::vector<Tensor>& inputs) {
  if (guards.empty()) return;
  std::map<std::string, int64_t> bindings;  // each bare-symbol input dim takes the given size
  for (size_t i = 0; i < model_inputs.size() && i < inputs.size(); ++i) {
    const Shape& declared = model_inputs[i].type.shape;
    for (size_t d = 0; d < declared.size() && d < size_t(inputs[i].dim()); ++d)
      if (!declared[d].is_static()) bindings.emplace(declared[d].str(), inputs[i].sizes()[d]);
  }
  for (const ImportGuard& g : guards) {
    const ShapeGuard& s = g.guard;
    if (decide(s.lhs.evaluate(bindings), s.op, s.rhs.evaluate(bindings)) == s.result) continue;
    std::string sizes;
    for (const auto& [name, value] : bindings) sizes += (sizes.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    throw Error("onnx model: the input sizes (" + sizes + ") break a shape decision made when the model was imported or compiled: " +
                guard_text(s) + " was " +
                (s.result ? "true" : "false") + " at " + g.node +
                "; import the model again with these sizes (ImportOptions::input_shapes)");
  }
}

EagerModel::EagerModel(const ImportedModel& model, Device device)
    : device_(device), inputs_(model.inputs), guards_(model.guards), graph_(model.graph.clone()) {
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
  check_model_inputs("EagerModel::run", inputs_, inputs);
  check_import_guards(inputs_, guards_, inputs);
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
    : device_(device), inputs_(model.inputs), guards_(model.guards), graph_(model.graph.clone()) {
  for (const Tensor& t : model.captured) weights_.push_back(t.to(device));
  // The passes and lowering infer shapes again; their decisions on symbols are checked too.
  detail::ImportGuards compile_guards;
  compile_guards.node = "(compiling for " + device.name() + ")";
  CompiledGraph compiled = [&] {
    GuardSinkScope record(&compile_guards);
    ArtifactScope code(recording_artifacts(), model.artifacts ? model.artifacts.get() : provided_artifacts());
    ProgramOptions program_options = options;  // the captured weights follow the model's inputs
    for (size_t i = inputs_.size(); i < graph_.inputs().size(); ++i) program_options.parameter_inputs.push_back(i);
    return compile_graph(graph_, device, {pipeline, program_options});
  }();
  std::set<std::string> seen;
  for (const ImportGuard& g : guards_) seen.insert(guard_text(g.guard));
  for (const ImportGuard& g : compile_guards.guards)
    if (seen.insert(guard_text(g.guard)).second) guards_.push_back(g);
  passes_ = std::move(compiled.passes);
  program_ = std::move(compiled.program);
}

std::vector<Tensor> CompiledModel::bind(const std::vector<Tensor>& inputs) const {
  check_model_inputs("CompiledModel::run", inputs_, inputs);
  check_import_guards(inputs_, guards_, inputs);
  std::vector<Tensor> args;
  for (const Tensor& t : inputs) args.push_back(t.to(device_));
  args.insert(args.end(), weights_.begin(), weights_.end());
  return args;
}

std::vector<Tensor> CompiledModel::run(const std::vector<Tensor>& inputs) {
  return run_program(*program_, bind(inputs));
}

}  // namespace kiln::onnx
