// The Vulkan pooling template (shaders/pool2d.comp): max and average pools, 1-d and 2-d, against
// the cpu reference over strides, dilations, asymmetric pads, ceil_mode and count_include_pad, with
// storage and texel reads forced and as the device chooses, under the Khronos validation layer with
// zero messages; compiled programs run a pool's pointwise consumers inside the template.
#include <gtest/gtest.h>


#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_pool_template.h"
#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/kiln.h"
#include "core/runtime/planned_program.h"
#include "support/vulkan_template_test.h"

namespace kiln {
namespace {

using testing::expect_close_sums;
using testing::random_values;

struct PoolCase {
  std::string name;
  bool max = true;
  std::vector<int64_t> x;  // [N, C, (H,) W]
  std::vector<int64_t> kernel, stride, padding, dilation;  // per spatial dim; padding begins then ends
  bool ceil_mode = false;
  bool count_include_pad = false;
};

// The output size as the op's shape rule computes it (core/ir/ops/conv.cpp).
std::vector<int64_t> out_dims(const PoolCase& c) {
  const size_t spatial = c.x.size() - 2;
  std::vector<int64_t> out = {c.x[0], c.x[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t padded = c.x[2 + i] + c.padding[i] + c.padding[spatial + i];
    const int64_t extent = (c.kernel[i] - 1) * c.dilation[i] + 1;
    int64_t size = (padded - extent + (c.ceil_mode ? c.stride[i] - 1 : 0)) / c.stride[i] + 1;
    if (c.ceil_mode && (size - 1) * c.stride[i] >= c.x[2 + i] + c.padding[i]) --size;
    out.push_back(size);
  }
  return out;
}

AttrMap attrs_of(const PoolCase& c) {
  AttrMap a;
  a.set("kernel", c.kernel);
  a.set("stride", c.stride);
  a.set("padding", c.padding);
  a.set("ceil_mode", c.ceil_mode);
  if (c.max)
    a.set("dilation", c.dilation);
  else
    a.set("count_include_pad", c.count_include_pad);
  return a;
}

std::vector<float> run_pool(Backend& backend, EagerPrograms* runner, const PoolCase& c, const std::vector<float>& input) {
  return testing::run_f32_op(backend, runner, c.max ? OpKind::MaxPool : OpKind::AvgPool, attrs_of(c), {input}, {c.x},
                             out_dims(c));
}

class VulkanPool : public testing::VulkanTemplateTest<> {
 protected:
  void SetUp() override {
    VulkanTemplateTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    runners_.push_back(std::make_unique<EagerPrograms>(*vk_, EagerOptions{.templates = vulkan::with_pool_template({})}));
    for (bool texel : {false, true})
      runners_.push_back(std::make_unique<EagerPrograms>(
          *vk_, EagerOptions{.templates = vulkan::with_pool_template({}, {.texel = texel})}));
  }
  void TearDown() override {
    runners_.clear();
    VulkanTemplateTest::TearDown();
  }

  // The template as the device chooses it, with storage reads and with texel reads, vs the cpu
  // reference; each run must be the template's (not the generic lowering's).
  void check(const PoolCase& c, uint32_t seed) {
    const std::vector<float> in = random_values(numel(c.x), seed);
    const std::vector<float> want = run_pool(*cpu_, nullptr, c, in);
    for (const auto& runner : runners_) {
      const size_t before = runner->stats().template_launches;
      const std::vector<float> got = run_pool(*vk_, runner.get(), c, in);
      EXPECT_EQ(runner->stats().template_launches, before + 1) << c.name;
      // A max is exact; an average of at most 64 values rounds a few ulps.
      expect_close_sums(got, want, c.max ? 0 : 64, c.name);
    }
  }

  std::vector<std::unique_ptr<EagerPrograms>> runners_;  // device's choice, storage reads, texel reads
};

TEST_F(VulkanPool, MaxPoolMatchesCpuOverStridesPadsDilationsAndCeilMode) {
  const std::vector<PoolCase> cases = {
      {"resnet_stem_3x3_s2_p1", true, {1, 4, 20, 20}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {"2x2_s2_odd_sizes", true, {2, 3, 9, 11}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {"asym_pads_stride_2x3", true, {1, 5, 13, 17}, {3, 4}, {2, 3}, {0, 2, 1, 1}, {1, 1}},
      {"dilation2", true, {1, 2, 15, 16}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},
      {"ceil_mode", true, {1, 3, 10, 11}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
      {"ceil_mode_with_pads", true, {2, 2, 7, 9}, {2, 3}, {2, 2}, {1, 1, 0, 1}, {1, 1}, true},
      {"row_longer_than_a_workgroup", true, {1, 2, 3, 300}, {1, 3}, {1, 1}, {0, 1, 0, 1}, {1, 1}},
      {"stride_past_kernel", true, {1, 3, 12, 12}, {2, 2}, {3, 3}, {0, 0, 0, 0}, {1, 1}},
      {"pool1d", true, {2, 3, 25}, {3}, {2}, {1, 1}, {1}},
      {"pool1d_ceil_dilation3", true, {1, 4, 22}, {2}, {3}, {0, 0}, {3}, true},
      // 3 * 7 * 7 floats: not whole texels, so a texel request falls back to storage reads.
      {"odd_element_count", true, {1, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
  };
  uint32_t seed = 1;
  for (const PoolCase& c : cases) check(c, seed += 2);
}

TEST_F(VulkanPool, AvgPoolMatchesCpuWithAndWithoutPaddingInTheCount) {
  std::vector<PoolCase> cases;
  for (bool count_pad : {false, true}) {
    const std::string suffix = count_pad ? "_count_pad" : "";
    const std::vector<PoolCase> some = {
        {"2x2_s2" + suffix, false, {1, 8, 12, 12}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
        {"3x3_s1_p1" + suffix, false, {2, 3, 9, 10}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
        {"asym_pads" + suffix, false, {1, 4, 11, 13}, {3, 2}, {2, 2}, {1, 0, 0, 1}, {1, 1}},
        {"ceil_mode_with_pads" + suffix, false, {1, 2, 10, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
        {"7x7_global_like" + suffix, false, {1, 16, 7, 7}, {7, 7}, {7, 7}, {0, 0, 0, 0}, {1, 1}},
        {"pool1d" + suffix, false, {3, 2, 19}, {4}, {3}, {2, 1}, {1}, true},
    };
    for (PoolCase c : some) {
      c.count_include_pad = count_pad;
      cases.push_back(c);
    }
  }
  uint32_t seed = 50;
  for (const PoolCase& c : cases) check(c, seed += 2);
}

// Eager ops through the backend's own planner take the template.
TEST_F(VulkanPool, BackendRunsF32PoolsThroughTheTemplate) {
  Device vk = Device::parse("vulkan");
  auto& backend = dynamic_cast<vulkan::VulkanBackend&>(vk.backend());
  Tensor x = randn({1, 4, 12, 12}, vk, 1);
  const size_t before = backend.eager_stats().template_launches;
  std::vector<float> max = max_pool2d(x, 3, 2, 1).to_vector<float>();
  std::vector<float> avg = avg_pool2d(x, 2).to_vector<float>();
  EXPECT_EQ(backend.eager_stats().template_launches, before + 2);
  Tensor cpu_x = x.to(Device::cpu());
  expect_close_sums(max, max_pool2d(cpu_x, 3, 2, 1).to_vector<float>(), 0, "max_pool2d through the backend");
  expect_close_sums(avg, avg_pool2d(cpu_x, 2).to_vector<float>(), 4, "avg_pool2d through the backend");
}

// Compiled: a max pool's per-channel scale and relu, and an average pool's residual add, run in the
// pool template's epilogue: two launches, both templates, matching the interpreter on cpu.
TEST_F(VulkanPool, CompiledPoolsRunTheirConsumersInTheTemplate) {
  Graph g = parse_graph(R"(graph @main(%0: f32[1,8,16,16] "x", %1: f32[8,1,1] "scale", %2: f32[1,8,8,8] "residual") {
  %3: f32[1,8,8,8] = max_pool(%0) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1], dilation=[1,1], ceil_mode=false, channels_last=false}
  %4: f32[1,8,8,8] = mul(%3, %1)
  %5: f32[1,8,8,8] = relu(%4)
  %6: f32[1,8,8,8] = avg_pool(%0) {kernel=[2,2], stride=[2,2], padding=[0,0,0,0], ceil_mode=false, count_include_pad=false, channels_last=false}
  %7: f32[1,8,8,8] = add(%6, %2)
  return %5, %7
})");
  verify_graph_or_throw(g);
  Device vk = Device::parse("vulkan");
  PlannedProgram program(g, vk);
  std::vector<Tensor> cpu_in = {randn({1, 8, 16, 16}, Device::cpu(), 21), randn({8, 1, 1}, Device::cpu(), 22),
                                randn({1, 8, 8, 8}, Device::cpu(), 23)};
  std::vector<Tensor> vk_in;
  for (const Tensor& t : cpu_in) vk_in.push_back(t.to(vk));
  std::vector<Tensor> got = run_program(program, vk_in), want = interpret(g, cpu_in);
  expect_close_sums(got[0].to_vector<float>(), want[0].to_vector<float>(), 1, "max pool epilogue, compiled");
  expect_close_sums(got[1].to_vector<float>(), want[1].to_vector<float>(), 4, "avg pool epilogue, compiled");
  std::vector<std::string> names;
  for (const PlannedLaunch& l : program.launches()) {
    EXPECT_TRUE(l.is_template) << l.name;
    names.push_back(l.name);
  }
  ASSERT_EQ(names.size(), 2u);
  const std::string reads = vk_->caps().is_cpu ? "_texel" : "";  // software devices read texels
  EXPECT_EQ(names[0], "max_pool_f32" + reads + "_mul_relu");
  EXPECT_EQ(names[1], "avg_pool_f32" + reads + "_add");
}

}  // namespace
}  // namespace kiln
