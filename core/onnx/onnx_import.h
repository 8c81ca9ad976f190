// ONNX models -> kiln Graph IR: the importer's public API, and running an imported model.
//
// Representation choices:
// - Initializers (and any constant tensor with more than kInlineConstantLimit elements) become
//   extra graph inputs after the model's real inputs, bound to `captured` tensors, as a traced
//   function's parameters are: the graph stays small to print and the weights can live on the
//   device. Small constants (Constant nodes, folded shape arithmetic) become `constant` nodes.
// - Nodes whose inputs are all constant are evaluated at import time on cpu (Shape, Gather on
//   shapes, Concat of sizes, ...), so value-dependent operands (Reshape's shape, Slice's starts)
//   become attributes. Such operands must be constant; `ImportOptions::input_values` can fix
//   graph inputs to values where needed (the test runner gives the test's inputs).
// - Symbolic dims (dim_param) become SymInt symbols; their hints come from `input_shapes` when
//   given, else 1.
// Every kiln node's provenance is Origin{imported = "<node name> (<OpType>)"}.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "core/frontend/tensor.h"
#include "core/ir/attr.h"
#include "core/ir/graph.h"
#include "core/passes/pass.h"
#include "core/runtime/program.h"
#include "core/support/artifacts.h"
#include "core/support/error.h"

namespace kiln::onnx {

// Opsets 7-17 fully; older models import where their ops mean the same (a legacy broadcast with
// an `axis`, for one, is refused as unsupported).
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 17;
inline constexpr int64_t kInlineConstantLimit = 64;

struct ImportOptions {
  // Values of graph inputs that the importer may fix where an op needs a constant operand
  // (Reshape's shape, Slice's starts, ...). Inputs fixed this way act as initializers and leave
  // ImportedModel::inputs; the others stay inputs. Their shapes also serve as input_shapes.
  std::map<std::string, Literal> input_values;
  // Actual sizes of graph inputs, giving symbolic dims their hints (1 where not given). Shape
  // decisions on symbols follow the hints and are checked on every run (ImportedModel::guards),
  // so give sizes typical of the runs.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

// import_onnx's error when the model is valid but uses ops, attributes or types kiln cannot
// express; the message lists every one, with node names.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

struct ModelIO {
  std::string name;
  TensorType type;
};

// A shape decision made on symbolic dims by the hints (`seq > 32` is false where a node slices a
// 32-row mask to the sequence length), and where: the node, or compiling. Every run re-checks it.
struct ImportGuard {
  ShapeGuard guard;
  std::string node;  // "node /attn/Slice (Slice)", or "(compiling for cpu)"
};

struct ImportedModel {
  Graph graph;                   // inputs: `inputs` in order, then one per captured tensor
  std::vector<Tensor> captured;  // cpu tensors bound to the trailing graph inputs
  std::vector<ModelIO> inputs;   // the model's real inputs (initializers excluded)
  std::vector<ModelIO> outputs;
  int64_t opset = 0;
  std::string producer;          // "pytorch 1.13", from the model's producer fields
  std::vector<ImportGuard> guards;
  // Compiled code a package carries (core/onnx/package.h): CompiledModel binds it instead of
  // compiling. Null for a model imported from ONNX.
  std::shared_ptr<const ArtifactSet> artifacts;
};

// Throws kiln::Error when `inputs` (bound to `model_inputs` in order) break one of `guards`,
// naming the decision, its node and the symbol values. EagerModel and CompiledModel check every run.
void check_import_guards(const std::vector<ModelIO>& model_inputs,
                         const std::vector<ImportGuard>& guards, const std::vector<Tensor>& inputs);

// Reads and converts `path`. Throws kiln::Error for unreadable, malformed or truncated files,
// missing external data, opsets outside [1, 17], shape conflicts, and unsupported ops (all of
// them listed at once, each with its node name).
ImportedModel import_onnx(const std::string& path, const ImportOptions& options = {});

// The names of the model's graph inputs that are not initializers, in order (what the backend
// tests' input_N.pb files bind).
std::vector<std::string> graph_input_names(const std::string& path);

// A TensorProto file (the backend tests' input_N.pb / output_N.pb) as a literal.
Literal read_tensor_file(const std::string& path);
struct NamedLiteral {
  std::string name;
  Literal literal;
};
NamedLiteral read_named_tensor_file(const std::string& path);

// Host tensor <-> literal.
Tensor literal_to_tensor(const Literal& literal, Device device = Device::cpu());
Literal tensor_to_literal(const Tensor& tensor);

// Runs the model on `device` with the interpreter: `inputs` bind ImportedModel::inputs in order.
// Returns the outputs on the device.
std::vector<Tensor> run_model(const ImportedModel& model, const std::vector<Tensor>& inputs,
                              Device device);

// The model prepared for repeated eager runs on one device: weights and constants are uploaded
// once, then each run() interprets the graph node by node (one op at a time, no fusion).
class EagerModel {
 public:
  EagerModel(const ImportedModel& model, Device device);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  Device device() const { return device_; }

 private:
  Device device_;
  std::vector<ModelIO> inputs_;
  std::vector<ImportGuard> guards_;
  Graph graph_;                // constants replaced by inputs bound to `bound_`
  std::vector<Tensor> bound_;  // on the device, bound after the model's inputs
};

// An imported model compiled for one device as kiln::compile compiles a traced function: the
// standard pass pipeline, then fused kernels and a memory plan (build_program). The weights are
// uploaded once; run() binds ImportedModel::inputs in order and returns the outputs on the device.
class CompiledModel {
 public:
  CompiledModel(const ImportedModel& model, Device device, const ProgramOptions& options = {},
                const PipelineOptions& pipeline = {});
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // The program's full argument list for `inputs`: them on the device, then the weights.
  std::vector<Tensor> bind(const std::vector<Tensor>& inputs) const;

  const Graph& graph() const { return graph_; }  // after the pass pipeline
  const std::vector<PassRecord>& passes() const { return passes_; }
  DeviceProgram& program() { return *program_; }
  Device device() const { return device_; }

 private:
  Device device_;
  std::vector<ModelIO> inputs_;
  std::vector<ImportGuard> guards_;
  Graph graph_;
  std::vector<PassRecord> passes_;
  std::vector<Tensor> weights_;  // on the device, bound after the model's inputs
  std::unique_ptr<DeviceProgram> program_;
};

}  // namespace kiln::onnx
