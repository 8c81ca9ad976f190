// Parameter gradients against PyTorch's. samples/onnx_models/export_gradients.py (Debian's torch,
// at test time) exports seeded models in training mode with the gradients of
// L = sum(model(x) * W) for every named parameter; here the imported graph gets the same loss,
// add_gradients differentiates it with respect to every parameter, and each gradient must match
// torch's within |kiln - torch| <= 1e-3 max|torch| + 1e-3 |torch| + 1e-7 (f32 on both sides, summed
// in different orders; the 1e-7 covers gradients that are zero but for rounding, as a conv bias's
// before a training batch norm), on the cpu reference and, compiled, on every other device that
// computes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <kiln/kiln.h>

#include "core/autodiff/partition.h"
#include "core/autodiff/reverse.h"
#include "core/onnx/onnx_import.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct GradientCase {
  std::string dir;
  onnx::ImportedModel model;                 // its graph: loss, then one gradient per parameter
  std::vector<std::string> parameters;      // the captured inputs' names, gradient order
  std::map<std::string, Literal> expected;  // torch's, by parameter name
  Tensor input;
};

// The imported model with L = sum(output * W) and the gradients of every captured input (the
// initializers) as its outputs; W becomes the last captured input.
GradientCase load_case(const std::string& name) {
  GradientCase c;
  c.dir = std::string(KILN_TEST_GRADIENTS) + "/" + name;
  c.model = onnx::import_onnx(c.dir + "/model.onnx");
  Graph& g = c.model.graph;
  const Literal w = onnx::read_tensor_file(c.dir + "/weight.pb");
  Value* y = g.outputs().at(0);
  Value* weight = g.add_input(y->type, "W");
  Value* loss = g.add_node(OpKind::Sum, {g.add_node(OpKind::Mul, {y, weight})->output()},
                           {{"dims", std::vector<int64_t>{}}, {"keepdim", false}})->output();
  GradientRequest request;
  request.outputs = {loss};
  const size_t first_captured = c.model.inputs.size();
  for (size_t i = first_captured; i + 1 < g.inputs().size(); ++i) {
    const std::string& pname = g.inputs()[i]->name;
    if (!fs::exists(c.dir + "/grads/" + pname + ".pb")) continue;  // running statistics
    request.wrt.push_back(g.inputs()[i]);
    c.parameters.push_back(pname);
    c.expected[pname] = onnx::read_tensor_file(c.dir + "/grads/" + pname + ".pb");
  }
  std::vector<Value*> outputs = {loss};
  for (Value* grad : add_gradients(g, request)) outputs.push_back(grad);
  g.set_outputs(outputs);
  c.model.captured.push_back(onnx::literal_to_tensor(w));
  c.input = onnx::literal_to_tensor(onnx::read_tensor_file(c.dir + "/input_0.pb"));
  return c;
}

void expect_torch_gradients(const GradientCase& c, const std::vector<Tensor>& results, const std::string& where) {
  ASSERT_EQ(results.size(), c.parameters.size() + 1) << where;
  // A gradient that is zero in exact arithmetic (a conv bias before batch norm in training mode:
  // the normalization removes any per-channel constant) is rounding noise of sums over the batch,
  // whose size follows the model's gradients, not its own: the absolute floor is 1e-5 of the
  // largest gradient of any parameter.
  double model_scale = 0;
  for (const auto& [name, literal] : c.expected)
    for (double v : onnx::literal_to_tensor(literal).to_vector<double>()) model_scale = std::max(model_scale, std::abs(v));
  size_t checked = 0;
  for (size_t k = 0; k < c.parameters.size(); ++k) {
    const std::string& pname = c.parameters[k];
    const Tensor want = onnx::literal_to_tensor(c.expected.at(pname));
    const Tensor& got = results[k + 1];
    ASSERT_EQ(got.sizes(), want.sizes()) << where << ": " << pname;
    const std::vector<double> a = got.to_vector<double>(), e = want.to_vector<double>();
    double scale = 0;
    for (double v : e) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < e.size(); ++i)
      ASSERT_LE(std::abs(a[i] - e[i]), 1e-3 * scale + 1e-3 * std::abs(e[i]) + 1e-5 * model_scale)
          << where << ": d L / d " << pname << " element " << i << " is " << a[i] << ", torch gives " << e[i];
    ++checked;
  }
  EXPECT_EQ(checked, c.expected.size()) << where << ": a parameter with torch's gradient was not differentiated";
}

void check_model(const std::string& name, bool on_every_device) {
  if (!fs::exists(std::string(KILN_TEST_GRADIENTS) + "/" + name + "/model.onnx"))
    GTEST_SKIP() << "no exported " << name << " (needs Debian's python3-torch): " << KILN_TEST_GRADIENTS;
  const GradientCase c = load_case(name);
  ASSERT_FALSE(c.parameters.empty());
  expect_torch_gradients(c, onnx::run_model(c.model, {c.input}, Device::ref()), "ref");
  if (!on_every_device) return;
  for (const DeviceEntry& e : available_devices()) {
    if (e.kind == BackendKind::Ref || e.kind == BackendKind::Null) continue;
    const Device dev(e.kind, e.index);
    onnx::CompiledModel compiled(c.model, dev);
    expect_torch_gradients(c, compiled.run({c.input}), dev.description() + ", compiled");
  }
}

// What a compiled differentiable call of the model would save for its backward (values_to_save,
// differentiating with respect to the parameters), in bytes, against saving every forward value.
double saved_fraction(const std::string& name) {
  onnx::ImportedModel model = onnx::import_onnx(std::string(KILN_TEST_GRADIENTS) + "/" + name + "/model.onnx");
  Graph& g = model.graph;
  Value* y = g.outputs().at(0);
  Value* loss = g.add_node(OpKind::Sum, {g.add_node(OpKind::Mul, {y, g.add_input(y->type, "W")})->output()},
                           {{"dims", std::vector<int64_t>{}}, {"keepdim", false}})->output();
  g.set_outputs({loss});
  std::vector<bool> wrt(g.inputs().size(), false);
  for (size_t i = model.inputs.size(); i + 1 < g.inputs().size(); ++i) wrt[i] = true;
  auto bytes = [](const Value* v) { return double(numel(static_dims(v->type.shape))) * double(dtype_size(v->type.dtype)); };
  double saved = 0, every = 0;
  for (const Value* v : values_to_save(g, wrt)) saved += bytes(v);
  for (const Node* n : g.nodes())
    if (n->kind != OpKind::Constant)
      for (const Value* v : n->outputs) every += bytes(v);
  return saved / every;
}

// The partition's target: at most half the bytes of saving every forward value.
TEST(GradientsVsTorch, ThePartitionSavesAtMostHalfOfTheForwardBytes) {
  for (const char* name : {"gpt2_block", "resnet18"}) {
    if (!fs::exists(std::string(KILN_TEST_GRADIENTS) + "/" + name + "/model.onnx")) GTEST_SKIP() << "no exported " << name;
    const double fraction = saved_fraction(name);
    EXPECT_LE(fraction, 0.5) << name;
    std::printf("%s: the backward saves %.1f%% of the forward's bytes\n", name, 100 * fraction);
  }
}

TEST(GradientsVsTorch, Mlp) { check_model("mlp", true); }
TEST(GradientsVsTorch, CnnWithBatchNormInTrainingMode) { check_model("cnn_batchnorm_train", true); }
TEST(GradientsVsTorch, Gpt2BlockWithCausalAttention) { check_model("gpt2_block", true); }
TEST(GradientsVsTorch, Resnet18InTrainingMode) { check_model("resnet18", true); }

}  // namespace
}  // namespace kiln
