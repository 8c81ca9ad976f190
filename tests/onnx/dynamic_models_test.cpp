// Models exported with dynamic axes (samples/onnx_models/export_models.py, the *_dynamic cases:
// a GPT block, nn.TransformerEncoder, an LSTM, a bidirectional GRU and a bidirectional relu RNN
// with dynamic batch and sequence length (the recurrences run as while_loops); the same LSTM and
// GRU with a static sequence, a ShuffleNet-style channel shuffle, a conv1d audio net and a small
// U-Net that upsamples, with dynamic batch) import once with symbolic dims, and one EagerModel or
// CompiledModel runs all three of each case's sizes against PyTorch's outputs at those sizes
// (|kiln - torch| <= 1e-4 + 1e-3 |torch|, the ONNX backend tests' tolerance), on cpu and every
// other device that computes. Compiled, the cpu backend compiles no C++ after the first size, and
// on every device sizes seen before compile nothing (a Vulkan matmul template compiles the variant
// each new shape class picks, once).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <kiln/kiln.h>

#include "backends/cpu/host_compiler.h"
#include "backends/vulkan/vulkan_backend.h"
#include "core/onnx/onnx_import.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const char* const kCases[] = {"gpt2_block_small_dynamic", "transformer_encoder_dynamic",
                              "lstm_dynamic",             "gru_bidirectional_dynamic",
                              "lstm_seq_dynamic",         "gru_bidirectional_seq_dynamic",
                              "rnn_relu_bidirectional_seq_dynamic",
                              "channel_shuffle_dynamic",  "audio_conv1d_dynamic",
                              "unet_upsample_dynamic"};

struct DataSet {
  Literal input;
  std::vector<Literal> outputs;
};

std::vector<DataSet> data_sets(const fs::path& dir) {
  std::vector<DataSet> sets;
  for (int k = 0; fs::exists(dir / ("test_data_set_" + std::to_string(k))); ++k) {
    const fs::path set = dir / ("test_data_set_" + std::to_string(k));
    DataSet d{onnx::read_tensor_file((set / "input_0.pb").string()), {}};
    for (int i = 0; fs::exists(set / ("output_" + std::to_string(i) + ".pb")); ++i)
      d.outputs.push_back(onnx::read_tensor_file((set / ("output_" + std::to_string(i) + ".pb")).string()));
    sets.push_back(std::move(d));
  }
  return sets;
}

std::string sizes_text(const std::vector<int64_t>& s) {
  std::string t;
  for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t;
}

void expect_close(const Tensor& got, const Literal& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.shape) << what;
  const std::vector<float> g = got.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = want.element(int64_t(i));
    worst = std::max(worst, std::abs(double(g[i]) - w) - 1e-3 * std::abs(w));
  }
  EXPECT_LE(worst, 1e-4) << what;
}

fs::path case_dir(const std::string& name) { return fs::path(KILN_TEST_MODELS) / name; }

// cpu and every other device that computes (lavapipe here).
std::vector<Device> devices() {
  std::vector<Device> out;
  for (const DeviceEntry& e : available_devices())
    if (e.kind != BackendKind::Ref && e.kind != BackendKind::Null) out.push_back(Device(e.kind, e.index));
  return out;
}

class DynamicModel : public ::testing::TestWithParam<const char*> {};

TEST_P(DynamicModel, ImportsWithSymbolicDims) {
  const onnx::ImportedModel model = onnx::import_onnx((case_dir(GetParam()) / "model.onnx").string());
  ASSERT_EQ(model.inputs.size(), 1u);
  EXPECT_FALSE(is_static(model.inputs[0].type.shape)) << model.inputs[0].type.str();
  EXPECT_EQ(model.inputs[0].type.shape[0].str(), "batch");
  // A recurrence over a symbolic sequence runs as one while_loop per layer and direction.
  const std::string name = GetParam();
  int64_t loops = 0;
  for (const Node* node : model.graph.nodes()) loops += node->kind == OpKind::WhileLoop;
  // The LSTM has 2 layers of one direction, the GRU and the RNN 1 layer of 2.
  const bool sequence_loops = name.find("_seq_dynamic") != std::string::npos;
  const int64_t expected = sequence_loops ? 2 : 0;
  EXPECT_EQ(loops, expected);
}

// What a device has compiled so far: C++ translation units (cpu) or GLSL shaders (Vulkan).
size_t compiles_so_far(const Device& device) {
  if (auto* vk = dynamic_cast<vulkan::VulkanBackend*>(&device.backend()))
    return vk->compile_stats().compiles + vk->compile_stats().disk_hits;
  const cpu::CompileCounts c = cpu::HostCompiler::counts();
  return size_t(c.compiled + c.loaded);
}

// Runs every data set through `run` (one eager model or compiled program) against PyTorch's.
template <class Run>
void expect_every_size(const std::vector<DataSet>& sets, Run run, const std::string& label) {
  for (const DataSet& set : sets) {
    const std::vector<Tensor> outs = run(set.input);
    ASSERT_EQ(outs.size(), set.outputs.size());
    for (size_t i = 0; i < outs.size(); ++i)
      expect_close(outs[i], set.outputs[i],
                   label + ", input " + sizes_text(set.input.shape) + ", output " + std::to_string(i));
  }
}

TEST_P(DynamicModel, OneEagerModelRunsEverySize) {
  const onnx::ImportedModel model = onnx::import_onnx((case_dir(GetParam()) / "model.onnx").string());
  const std::vector<DataSet> sets = data_sets(case_dir(GetParam()));
  ASSERT_EQ(sets.size(), 3u);
  for (const Device& device : devices()) {
    onnx::EagerModel eager(model, device);
    expect_every_size(sets, [&](const Literal& x) { return eager.run({onnx::literal_to_tensor(x, device)}); },
                      device.description() + " eager");
  }
}

TEST_P(DynamicModel, OneCompileServesEverySize) {
  const onnx::ImportedModel model = onnx::import_onnx((case_dir(GetParam()) / "model.onnx").string());
  const std::vector<DataSet> sets = data_sets(case_dir(GetParam()));
  ASSERT_EQ(sets.size(), 3u);
  for (const Device& device : devices()) {
    onnx::CompiledModel compiled(model, device);
    auto run = [&](const Literal& x) { return compiled.run({onnx::literal_to_tensor(x, device)}); };
    run(sets[0].input);
    const size_t first = compiles_so_far(device);
    expect_every_size(sets, run, device.description() + " compiled");
    // Generated kernels serve every size. A Vulkan template (matmul) compiles the variant a new
    // shape class picks, once; the cpu backend's templates are library calls.
    if (device.kind() == BackendKind::Cpu)
      EXPECT_EQ(compiles_so_far(device), first) << device.description() << ": a later size compiled code";
    const size_t warm = compiles_so_far(device);
    expect_every_size(sets, run, device.description() + " compiled, again");
    EXPECT_EQ(compiles_so_far(device), warm) << device.description() << ": a size seen before compiled code";
  }
}

INSTANTIATE_TEST_SUITE_P(Exported, DynamicModel, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param); });

// The GPT block slices its 32x32 causal mask to the sequence length: the import decides
// seq <= 32 and every run checks it, so a longer sequence is refused by name, as PyTorch refuses
// it, instead of reading past the mask.
TEST(DynamicModelGuards, ASequenceLongerThanTheMaskBreaksTheImportGuard) {
  const onnx::ImportedModel model =
      onnx::import_onnx((case_dir("gpt2_block_small_dynamic") / "model.onnx").string());
  bool mask_guard = false;
  for (const onnx::ImportGuard& g : model.guards)
    mask_guard = mask_guard || (g.node.find("Slice") != std::string::npos &&
                                g.guard.lhs.str() + guard_op_text(g.guard.op) + g.guard.rhs.str() == "seq>32");
  EXPECT_TRUE(mask_guard) << "no seq > 32 guard from the mask's Slice";
  onnx::CompiledModel compiled(model, Device::cpu());
  const Tensor x = zeros({2, 40, 128});
  try {
    compiled.run({x});
    FAIL() << "a 40-long sequence ran";
  } catch (const Error& e) {
    const std::string msg = e.what();  // "(batch=2, seq=40) ... seq > 32 was false at node ..."
    EXPECT_NE(msg.find("seq=40"), std::string::npos) << msg;
    EXPECT_NE(msg.find("seq > 32 was false"), std::string::npos) << msg;
    EXPECT_NE(msg.find("/attn/Slice"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln
