// Fuzz targets over the ONNX reader: whole models (imported, then run on ref when small enough)
// and single TensorProtos.
#include <cstring>

#include "core/frontend/factories.h"
#include "core/onnx/onnx_import.h"
#include "core/support/error.h"
#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {
namespace {

// Runs are bounded so that each input takes milliseconds: no value over 2^16 elements and 2^20 in
// all (symbolic dims at their hint, 1). Larger models are still imported, only not run.
constexpr int64_t kMaxValueElements = int64_t(1) << 16;
constexpr int64_t kMaxTotalElements = int64_t(1) << 20;

bool small_enough_to_run(const Graph& graph) {
  int64_t total = 0;
  auto fits = [&](const Value* v) {
    const int64_t n = numel(v->type.shape).hint();
    total += n;
    return n >= 0 && n <= kMaxValueElements && total <= kMaxTotalElements;
  };
  for (const Value* v : graph.inputs())
    if (!fits(v)) return false;
  for (const Node* node : graph.nodes())
    for (const Value* v : node->outputs)
      if (!fits(v)) return false;
  return true;
}

}  // namespace

int onnx_import(const uint8_t* data, size_t size) {
  const std::string path = write_scratch("model.onnx", data, size);
  try {
    const onnx::ImportedModel model = onnx::import_onnx(path);
    if (!small_enough_to_run(model.graph)) return 0;
    std::vector<Tensor> inputs;
    for (const onnx::ModelIO& io : model.inputs) {
      std::vector<int64_t> dims;
      for (const SymInt& d : io.type.shape) dims.push_back(d.hint());
      inputs.push_back(ones(dims, io.type.dtype));
    }
    onnx::run_model(model, inputs, Device::ref());
  } catch (const Error&) {
  }
  return 0;
}

int tensor_proto(const uint8_t* data, size_t size) {
  const std::string path = write_scratch("tensor.pb", data, size);
  try {
    const onnx::NamedLiteral named = onnx::read_named_tensor_file(path);
    const Literal& literal = named.literal;
    const int64_t n = literal.numel();
    if (size_t(n) * dtype_size(literal.dtype) != literal.bytes.size())
      throw std::logic_error("fuzz tensor_proto: a literal of " + std::to_string(n) + " elements has " +
                             std::to_string(literal.bytes.size()) + " bytes");
    // Through a tensor and back: the same literal.
    if (n <= kMaxValueElements &&
        !(onnx::tensor_to_literal(onnx::literal_to_tensor(literal)) == literal))
      throw std::logic_error("fuzz tensor_proto: a literal changed on its way through a tensor");
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace kiln::fuzz
