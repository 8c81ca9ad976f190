// The Vulkan conv templates (shaders/conv2d.comp, shaders/conv2d_texel.comp): every variant
// (implicit GEMM with storage or texel reads or shared-memory tiles, 1x1 pointwise, depthwise) against the cpu reference over strides, asymmetric pads, dilations, groups, channel
// multipliers, bias and 1-d, under the Khronos validation layer with zero messages; a compiled
// program runs a lone conv with the template; per-layer timings of ResNet-18 / MobileNetV2 shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_conv_template.h"
#include "core/frontend/run_program.h"
#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/kiln.h"
#include "core/frontend/interpreter.h"
#include "core/runtime/compile_graph.h"
#include "core/runtime/planned_program.h"
#include "support/vulkan_template_test.h"

namespace kiln {
namespace {

using testing::expect_close_sums;
using testing::random_values;

struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;  // input [N, C, (H,) W], weight [O, C/groups, (KH,) KW]
  bool bias = false;
  std::vector<int64_t> stride, padding, dilation;  // per spatial dim; padding begins then ends
  int64_t groups = 1;
};

std::vector<int64_t> out_dims(const ConvCase& c) {
  const size_t spatial = c.x.size() - 2;
  std::vector<int64_t> out = {c.x[0], c.w[0]};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t padded = c.x[2 + i] + c.padding[i] + c.padding[spatial + i];
    const int64_t extent = (c.w[2 + i] - 1) * c.dilation[i] + 1;
    out.push_back((padded - extent) / c.stride[i] + 1);
  }
  return out;
}

AttrMap attrs_of(const ConvCase& c) {
  AttrMap a;
  a.set("stride", c.stride);
  a.set("padding", c.padding);
  a.set("dilation", c.dilation);
  a.set("groups", c.groups);
  return a;
}


// Runs the conv on `backend` (through `runner` when given), host data in and out; `seconds` gets
// the best of `reps` timed runs after a warm-up when reps > 0.
std::vector<float> run_conv(Backend& backend, EagerPrograms* runner, const ConvCase& c,
                            const std::vector<std::vector<float>>& inputs, int reps = 0,
                            double* seconds = nullptr) {
  std::vector<std::vector<int64_t>> dims = {c.x, c.w};
  if (c.bias) dims.push_back({c.w[0]});
  return testing::run_f32_op(backend, runner, OpKind::Conv, attrs_of(c), inputs, dims, out_dims(c), reps, seconds);
}

class VulkanConv : public testing::VulkanTemplateTest<> {
 protected:
  void SetUp() override {
    VulkanTemplateTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    runner_ = std::make_unique<EagerPrograms>(*vk_, EagerOptions{.templates = vulkan::with_conv_template({})});
    for (vulkan::ConvTemplateOptions forced : {vulkan::ConvTemplateOptions{.texel = false, .shared = false},
                                               vulkan::ConvTemplateOptions{.texel = true},
                                               vulkan::ConvTemplateOptions{.texel = false, .shared = true}})
      forced_.push_back(std::make_unique<EagerPrograms>(
          *vk_, EagerOptions{.templates = vulkan::with_conv_template({}, forced)}));
  }
  void TearDown() override {
    runner_.reset();
    forced_.clear();
    VulkanTemplateTest::TearDown();
  }

  std::vector<std::vector<float>> inputs_for(const ConvCase& c, uint32_t seed) {
    std::vector<std::vector<float>> in = {random_values(numel(c.x), seed), random_values(numel(c.w), seed + 1)};
    if (c.bias) in.push_back(random_values(c.w[0], seed + 2));
    return in;
  }

  // The template on Vulkan, as the device chooses it and with storage reads, texel reads and
  // shared-memory tiles forced, vs the cpu reference; also checks that the template (not the
  // lowering) ran.
  void check(const ConvCase& c, uint32_t seed) {
    const auto in = inputs_for(c, seed);
    std::vector<float> want = run_conv(*cpu_, nullptr, c, in);
    for (EagerPrograms* runner : {runner_.get(), forced_[0].get(), forced_[1].get(), forced_[2].get()}) {
      const size_t before = runner->stats().template_launches;
      std::vector<float> got = run_conv(*vk_, runner, c, in);
      EXPECT_EQ(runner->stats().template_launches, before + 1) << c.name;
      expect_close_sums(got, want, numel(c.w) / c.w[0], c.name);
    }
  }

  std::unique_ptr<EagerPrograms> runner_;
  std::vector<std::unique_ptr<EagerPrograms>> forced_;  // storage reads, texel reads, shared tiles
};

TEST_F(VulkanConv, ImplicitGemmMatchesCpuOverStridesPadsDilationsGroupsAndBias) {
  const std::vector<ConvCase> cases = {
      {"3x3_pad1_bias", {1, 3, 11, 13}, {5, 3, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"3x3_stride2_asym_pads", {2, 4, 9, 8}, {6, 4, 3, 3}, false, {2, 1}, {0, 2, 1, 0}, {1, 1}, 1},
      {"dilation2_stride3", {1, 3, 17, 15}, {4, 3, 3, 2}, true, {3, 2}, {2, 1, 2, 1}, {2, 3}, 1},
      {"groups2", {2, 6, 10, 9}, {8, 3, 3, 3}, true, {1, 2}, {1, 1, 1, 1}, {1, 1}, 2},
      {"groups3_one_out_channel_each", {1, 6, 7, 7}, {3, 2, 2, 2}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 3},
      {"7x7_stride2_pad3_resnet_stem", {1, 3, 40, 36}, {16, 3, 7, 7}, true, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},
      {"wide_out_channels_not_tile_multiple", {1, 9, 12, 10}, {70, 9, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"1x1_stride2_downsample", {1, 16, 14, 14}, {24, 16, 1, 1}, false, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
      {"1x1_pointwise", {2, 20, 9, 11}, {33, 20, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"1x1_pointwise_grouped", {1, 8, 5, 6}, {12, 2, 1, 1}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 4},
      {"1x1_pad1_is_not_pointwise", {1, 4, 5, 5}, {3, 4, 1, 1}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"conv1d_stride2_pad", {2, 3, 20}, {5, 3, 4}, true, {2}, {1, 2}, {1}, 1},
      {"kernel_covers_whole_input", {1, 2, 3, 3}, {4, 2, 3, 3}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      // Channels per group a multiple of 4: the texel variant takes these where texels are chosen.
      // Rows of 7 and 13 start mid-texel; pads past a whole texel; the first row reads before the
      // buffer's start.
      {"texel_3x3_rows_of_7", {2, 8, 7, 7}, {12, 8, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"texel_5x5_stride3_pads_past_a_texel", {1, 4, 19, 13}, {9, 4, 5, 5}, false, {3, 3}, {5, 1, 2, 6}, {1, 1}, 1},
      {"texel_dilation2_stride2", {1, 12, 16, 18}, {10, 12, 3, 3}, true, {2, 2}, {2, 2, 2, 2}, {2, 2}, 1},
      {"texel_groups2_wide_output", {1, 16, 9, 30}, {70, 8, 3, 1}, true, {1, 2}, {1, 0, 1, 0}, {1, 1}, 2},
      {"texel_1x1", {1, 32, 6, 10}, {20, 32, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"texel_conv1d", {3, 8, 21}, {6, 8, 3}, false, {1}, {2, 1}, {3}, 1},
      // 16x16 taps (a weight gradient's kernel is the output's size): storage reads even when texels
      // are asked for, since the texel variant unrolls every tap and the SPIR-V optimizer ran out of
      // memory on it.
      {"16x16_taps_take_storage_reads", {1, 4, 20, 20}, {2, 4, 16, 16}, false, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
  };
  uint32_t seed = 10;
  for (const ConvCase& c : cases) check(c, seed += 3);
}

TEST_F(VulkanConv, DepthwiseMatchesCpuWithStridesDilationsPadsAndChannelMultiplier) {
  const std::vector<ConvCase> cases = {
      {"dw3x3_pad1_bias", {1, 8, 13, 17}, {8, 1, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},
      {"dw3x3_stride2", {2, 6, 15, 14}, {6, 1, 3, 3}, false, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6},
      {"dw_dilation2_asym_pads", {1, 5, 12, 19}, {5, 1, 3, 3}, true, {1, 1}, {2, 0, 1, 3}, {2, 2}, 5},
      {"dw_multiplier2_5x5_stride_2x3", {1, 4, 16, 23}, {8, 1, 5, 5}, true, {2, 3}, {2, 2, 2, 2}, {1, 1}, 4},
      {"dw_row_longer_than_a_workgroup", {1, 3, 4, 200}, {3, 1, 3, 3}, false, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},
      {"dw_conv1d", {1, 4, 30}, {4, 1, 5}, true, {2}, {2, 2}, {1}, 4},
  };
  uint32_t seed = 100;
  for (const ConvCase& c : cases) check(c, seed += 3);
}

// The variant follows the device's caps: texels on software devices, shared-memory tiles on GPUs
// with room for them, storage reads on GPUs without; depthwise convs keep their own variant.
TEST(VulkanConvVariant, FollowsTheDeviceCaps) {
  const ConvCase conv = {"3x3", {1, 8, 14, 14}, {16, 8, 3, 3}, false, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  const ConvCase depthwise = {"dw", {1, 8, 14, 14}, {8, 1, 3, 3}, false, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8};
  auto name_on = [](const ConvCase& c, DeviceCaps caps) {
    std::vector<BufferView> in = {{nullptr, DType::F32, c.x}, {nullptr, DType::F32, c.w}};
    BufferView out{nullptr, DType::F32, out_dims(c)};
    const AttrMap attrs = attrs_of(c);
    const std::optional<TemplateLaunch> launch =
        vulkan::conv_template_launch(OpRun{OpKind::Conv, attrs, in, std::span(&out, 1)}, caps);
    return launch ? launch->name : std::string("none");
  };
  DeviceCaps gpu;
  gpu.shared_memory_bytes = 48 * 1024;
  gpu.max_workgroup_invocations = 1024;
  DeviceCaps small_gpu = gpu;
  small_gpu.shared_memory_bytes = 4 * 1024;  // less than the 64x64 tiles take
  DeviceCaps software = gpu;
  software.is_cpu = true;
  EXPECT_EQ(name_on(conv, gpu), "conv2d_f32_shared");
  EXPECT_EQ(name_on(conv, small_gpu), "conv2d_f32");
  EXPECT_EQ(name_on(conv, software), "conv2d_f32_texel");
  EXPECT_EQ(name_on(depthwise, gpu), "conv2d_f32_dw");
}

// Eager ops through the backend's own planner: f32 convs take the template, f64 keeps the lowering.
TEST_F(VulkanConv, BackendRunsF32ConvThroughTheTemplate) {
  Device vk = Device::parse("vulkan");
  auto& backend = dynamic_cast<vulkan::VulkanBackend&>(vk.backend());
  Tensor x = randn({1, 4, 9, 9}, vk, 1), w = randn({6, 4, 3, 3}, vk, 2), b = randn({6}, vk, 3);
  size_t before = backend.eager_stats().template_launches;
  std::vector<float> got = conv2d(x, w, b, 1, 1).to_vector<float>();
  EXPECT_EQ(backend.eager_stats().template_launches, before + 1);
  Device cpu = Device::cpu();
  std::vector<float> want = conv2d(x.to(cpu), w.to(cpu), b.to(cpu), 1, 1).to_vector<float>();
  expect_close_sums(got, want, 36, "conv2d through the backend");
}

Graph parse_checked(const std::string& text) {
  Graph g = parse_graph(text);
  verify_graph_or_throw(g);
  return g;
}

// A compiled program: a conv the backend has a template for launches the template (with its relu
// in the template's epilogue); the result matches the interpreter on cpu.
TEST_F(VulkanConv, CompiledProgramRunsConvsWithTheTemplate) {
  Graph g = parse_checked(R"(graph @main(%0: f32[1,4,10,10] "x", %1: f32[8,4,3,3] "w", %2: f32[8] "b", %3: f32[8,8,1,1] "w2") {
  %4: f32[1,8,10,10] = conv(%0, %1, %2) {stride=[1,1], padding=[1,1,1,1], dilation=[1,1], groups=1, channels_last=false}
  %5: f32[1,8,10,10] = relu(%4)
  %6: f32[1,8,10,10] = conv(%5, %3) {stride=[1,1], padding=[0,0,0,0], dilation=[1,1], groups=1, channels_last=false}
  return %6
})");
  Device vk = Device::parse("vulkan");
  PlannedProgram program(g, vk);
  std::vector<Tensor> cpu_in = {randn({1, 4, 10, 10}, Device::cpu(), 7), randn({8, 4, 3, 3}, Device::cpu(), 8),
                                randn({8}, Device::cpu(), 9), randn({8, 8, 1, 1}, Device::cpu(), 10)};
  std::vector<Tensor> vk_in;
  for (const Tensor& t : cpu_in) vk_in.push_back(t.to(vk));
  std::vector<float> got = run_program(program, vk_in)[0].to_vector<float>();
  std::vector<float> want = interpret(g, cpu_in)[0].to_vector<float>();
  expect_close_sums(got, want, 36 * 8, "conv -> relu -> 1x1 conv, compiled");
  int conv_templates = 0;
  for (const PlannedLaunch& l : program.launches())
    if (l.is_template && l.name.rfind("conv2d_f32", 0) == 0) ++conv_templates;
  EXPECT_EQ(conv_templates, 2) << "both convs should run the conv template";
}

// compile_graph on lavapipe: 3x3 convs of 16 channels at 12x12 outputs (36 tiles) run as Winograd
// F(2x2, 3x3). A constant weight's transform is folded at compile time; a parameter's runs once
// and is kept while the same weight buffer comes back (kept_kernels.h), again for a new one. Bias
// and relu run in the output transform's kernel. Values against the interpreter's direct conv on
// cpu, on every run.
TEST_F(VulkanConv, CompiledConvsRunAsWinogradWithTheWeightTransformKept) {
  if (std::getenv("KILN_WINOGRAD")) GTEST_SKIP() << "KILN_WINOGRAD is set";
  std::vector<float> w = random_values(8 * 16 * 9, 21);
  std::string literal;
  for (float v : w) literal += (literal.empty() ? "" : ", ") + std::to_string(v);
  const std::string conv = " {channels_last=false, dilation=[1,1], groups=1, padding=[1,1,1,1], stride=[1,1]}";
  Graph g = parse_checked("graph @main(%0: f32[1,16,12,12] \"x\", %1: f32[8] \"b\", %2: f32[8,16,3,3] \"w\") {\n"
                          "  %3: f32[8,16,3,3] = constant() {value=dense<f32[8,16,3,3]>[" + literal + "]}\n"
                          "  %4: f32[1,8,12,12] = conv(%0, %3, %1)" + conv + "\n"
                          "  %5: f32[1,8,12,12] = relu(%4)\n"
                          "  %6: f32[1,8,12,12] = conv(%0, %2, %1)" + conv + "\n"
                          "  return %5, %6\n}");
  const Graph original = g.clone();
  Device vk = Device::parse("vulkan");
  CompileGraphOptions options;
  options.program.parameter_inputs = {2};
  std::unique_ptr<DeviceProgram> compiled = compile_graph(g, vk, options).program;
  auto* program = dynamic_cast<PlannedProgram*>(compiled.get());
  ASSERT_NE(program, nullptr);
  std::vector<Tensor> cpu_in = {randn({1, 16, 12, 12}, Device::cpu(), 22), randn({8}, Device::cpu(), 23),
                                randn({8, 16, 3, 3}, Device::cpu(), 24)};
  auto run_and_check = [&](const std::string& what) {
    std::vector<Tensor> vk_in;
    for (const Tensor& t : cpu_in) vk_in.push_back(t.to(vk));
    std::vector<Tensor> got = run_program(*program, vk_in), want = interpret(original, cpu_in);
    expect_close_sums(got[0].to_vector<float>(), want[0].to_vector<float>(), 16 * 9 * 4, what + ", constant weight");
    expect_close_sums(got[1].to_vector<float>(), want[1].to_vector<float>(), 16 * 9 * 4, what + ", weight passed in");
    return vk_in;
  };
  std::vector<Tensor> vk_in = run_and_check("first run");
  EXPECT_EQ(program->kept_launches(), 0);
  std::vector<Tensor> again = {randn({1, 16, 12, 12}, vk, 25), vk_in[1], vk_in[2]};  // new data, same weight
  cpu_in[0] = again[0].to(Device::cpu());
  std::vector<Tensor> got = run_program(*program, again), want = interpret(original, cpu_in);
  expect_close_sums(got[1].to_vector<float>(), want[1].to_vector<float>(), 16 * 9 * 4, "same weight, new data");
  EXPECT_EQ(program->kept_launches(), 1) << "the weight transform is kept";
  cpu_in[2] = randn({8, 16, 3, 3}, Device::cpu(), 26);  // a new weight: transformed again
  run_and_check("new weight");
  EXPECT_EQ(program->kept_launches(), 1);

  std::vector<std::string> names;
  for (const PlannedLaunch& l : program->launches()) names.push_back(l.name);
  auto has = [&](const std::string& prefix) {
    return std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(has("winograd_input"), 1) << "both convs read one transform of x";
  EXPECT_EQ(has("fused_winograd_output_add_relu"), 1);
  EXPECT_EQ(has("fused_winograd_output_add"), 2);
  EXPECT_EQ(has("winograd_weights"), 1) << "only the parameter's transform runs; the constant's is folded";
  EXPECT_EQ(has("conv2d_f32"), 0);
}

// The pointwise chain after a conv or matmul runs inside its template, where it stores: a
// per-channel scale and a clip, a full-size residual and a relu, a bias along a matmul's columns, a
// scalar operand on the left of a sub, and gelu. Three launches, each a template (the convs one of each
// implicit-GEMM variant); the results match the interpreter on cpu.
TEST_F(VulkanConv, CompiledConvsAndMatmulsRunTheirEpiloguesInTheTemplate) {
  Graph g = parse_checked(R"(graph @main(%0: f32[1,3,10,10] "x", %1: f32[8,3,3,3] "w", %2: f32[8] "b", %3: f32[8,1,1] "scale", %4: f32[8,8,1,1] "w2", %5: f32[64,96] "a", %6: f32[96,64] "m", %7: f32[64] "bias") {
  %8: f32[1,8,10,10] = conv(%0, %1, %2) {stride=[1,1], padding=[1,1,1,1], dilation=[1,1], groups=1, channels_last=false}
  %9: f32[1,8,10,10] = mul(%8, %3)
  %10: f32[1,8,10,10] = clip(%9) {min=0.0, max=6.0}
  %11: f32[1,8,10,10] = conv(%10, %4) {stride=[1,1], padding=[0,0,0,0], dilation=[1,1], groups=1, channels_last=false}
  %12: f32[1,8,10,10] = add(%11, %10)
  %13: f32[1,8,10,10] = relu(%12)
  %14: f32[64,64] = matmul(%5, %6)
  %15: f32[64,64] = add(%14, %7)
  %16: f32[] = constant() {value=dense<f32[]>[0.5]}
  %17: f32[64,64] = sub(%16, %15)
  %18: f32[64,64] = gelu(%17) {approximate="none"}
  return %13, %18
})");
  Device vk = Device::parse("vulkan");
  PlannedProgram program(g, vk);
  std::vector<Tensor> cpu_in = {randn({1, 3, 10, 10}, Device::cpu(), 11), randn({8, 3, 3, 3}, Device::cpu(), 12),
                                randn({8}, Device::cpu(), 13),           randn({8, 1, 1}, Device::cpu(), 14),
                                randn({8, 8, 1, 1}, Device::cpu(), 15),  randn({64, 96}, Device::cpu(), 16),
                                randn({96, 64}, Device::cpu(), 17),      randn({64}, Device::cpu(), 18)};
  std::vector<Tensor> vk_in;
  for (const Tensor& t : cpu_in) vk_in.push_back(t.to(vk));
  std::vector<Tensor> got = run_program(program, vk_in), want = interpret(g, cpu_in);
  expect_close_sums(got[0].to_vector<float>(), want[0].to_vector<float>(), 27 * 8, "conv epilogues, compiled");
  expect_close_sums(got[1].to_vector<float>(), want[1].to_vector<float>(), 96, "matmul epilogue, compiled");
  std::vector<std::string> names;
  for (const PlannedLaunch& l : program.launches()) {
    EXPECT_TRUE(l.is_template) << l.name;
    names.push_back(l.name);
  }
  ASSERT_EQ(names.size(), 3u);
  // Software devices (lavapipe): storage reads for 3 input channels, texels for 8; GPUs stage
  // both through shared memory.
  const bool software = vk_->caps().is_cpu;
  EXPECT_EQ(names[0], software ? "conv2d_f32_bias_mul_clip" : "conv2d_f32_shared_bias_mul_clip");
  EXPECT_EQ(names[1], software ? "conv2d_f32_texel_add_relu" : "conv2d_f32_shared_add_relu");
  EXPECT_NE(names[2].find("_add_sub_gelu"), std::string::npos) << names[2];
}

// Per-layer times of representative ResNet-18 and MobileNetV2 layers (batch 1, 224x224 input): cpu
// reference vs the Vulkan template (and the generic lowering with KILN_CONV_BENCH_GENERIC=1; it takes
// seconds per layer on lavapipe), each result checked against the cpu reference.
TEST_F(VulkanConv, ModelLayerTimings) {
  const std::vector<ConvCase> layers = {
      {"resnet18 conv1 7x7/2 3->64 @224", {1, 3, 224, 224}, {64, 3, 7, 7}, true, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},
      {"resnet18 layer1 3x3 64->64 @56", {1, 64, 56, 56}, {64, 64, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"resnet18 layer2 3x3/2 64->128 @56", {1, 64, 56, 56}, {128, 64, 3, 3}, true, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {"resnet18 layer3 3x3 256->256 @14", {1, 256, 14, 14}, {256, 256, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"resnet18 layer4 3x3 512->512 @7", {1, 512, 7, 7}, {512, 512, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"mobilenetv2 1x1 expand 24->144 @56", {1, 24, 56, 56}, {144, 24, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"mobilenetv2 dw 3x3 144 @56", {1, 144, 56, 56}, {144, 1, 3, 3}, true, {1, 1}, {1, 1, 1, 1}, {1, 1}, 144},
      {"mobilenetv2 dw 3x3/2 144 @56", {1, 144, 56, 56}, {144, 1, 3, 3}, true, {2, 2}, {1, 1, 1, 1}, {1, 1}, 144},
      {"mobilenetv2 1x1 project 960->160 @7", {1, 960, 7, 7}, {160, 960, 1, 1}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
  };
  const bool generic = std::getenv("KILN_CONV_BENCH_GENERIC") != nullptr;
  EagerPrograms lowering(*vk_, {.generic_only = true});
  std::printf("%-40s %10s %12s %12s\n", "layer", "cpu ms", "vk tmpl ms", "vk generic ms");
  uint32_t seed = 300;
  for (const ConvCase& c : layers) {
    const auto in = inputs_for(c, seed += 3);
    double cpu_s = 0, tmpl_s = 0, gen_s = -1;
    std::vector<float> want = run_conv(*cpu_, nullptr, c, in, 3, &cpu_s);
    std::vector<float> got = run_conv(*vk_, runner_.get(), c, in, 3, &tmpl_s);
    expect_close_sums(got, want, numel(c.w) / c.w[0], c.name);
    if (generic) run_conv(*vk_, &lowering, c, in, 1, &gen_s);
    std::printf("%-40s %10.2f %12.2f %12.2f\n", c.name.c_str(), cpu_s * 1e3, tmpl_s * 1e3, gen_s * 1e3);
  }
}

}  // namespace
}  // namespace kiln
