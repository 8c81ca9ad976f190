// The Vulkan row templates (shaders/softmax.comp, layernorm.comp, reduce.comp): softmax,
// log_softmax, layer_norm and sum/mean/max/min/prod over the innermost axis against the cpu
// reference, for rows of 1 to 4097 elements, many short rows per workgroup, rows past a
// workgroup's register cache, with subgroup arithmetic and with the shared-memory tree, under the
// Khronos validation layer with zero messages; each case asserts that exactly one template
// launch ran. Ops the templates do not take (other axes, f16) keep the generic lowering; a compiled
// program runs lone softmax / layer_norm / reduction groups as the templates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_norm_template.h"
#include "core/frontend/run_program.h"
#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/kiln.h"
#include "core/frontend/interpreter.h"
#include "core/runtime/planned_program.h"
#include "support/vulkan_template_test.h"

namespace kiln {
namespace {


// Magnitudes in [lo, hi] with random signs (or all positive): a dropped or doubled element moves
// a sum by at least `lo`, well past the summation tolerance.
std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f,
                                 bool random_sign = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = random_sign && sign(gen) ? -dist(gen) : dist(gen);
  return v;
}

struct OpCase {
  std::string name;
  OpKind kind;
  AttrMap attrs;
  std::vector<std::vector<int64_t>> inputs;  // dims of each input (x first)
  std::vector<int64_t> out;
};

// Runs one op on `backend` (through `runner` when given), host data in and out.
std::vector<float> run_op(Backend& backend, EagerPrograms* runner, const OpCase& c,
                          const std::vector<std::vector<float>>& inputs) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<BufferView> views;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    buffers.push_back(backend.alloc(std::max<size_t>(inputs[i].size() * 4, 4)));
    backend.upload(*buffers.back(), inputs[i].data(), inputs[i].size() * 4);
    views.push_back({buffers.back().get(), DType::F32, c.inputs[i]});
  }
  auto out = backend.alloc(size_t(std::max<int64_t>(numel(c.out), 1)) * 4);
  BufferView out_view{out.get(), DType::F32, c.out};
  OpRun run{c.kind, c.attrs, views, std::span(&out_view, 1)};
  if (runner) {
    runner->run(run);
    runner->sync();
  } else {
    run_on_backend(backend, run);
  }
  std::vector<float> result(size_t(numel(c.out)));
  backend.download(*out, result.data(), result.size() * 4);
  return result;
}

// Elementwise |got - want| <= atol + rtol * |want|; NaN must meet NaN, infinities must match.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isinf(want[i])) {
      ASSERT_EQ(std::isnan(got[i]), std::isnan(want[i])) << what << " at " << i << ": " << got[i];
      if (std::isinf(want[i])) ASSERT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(double(want[i]))) << what << " at " << i;
  }
}

AttrMap dim_attr(int64_t dim) {
  AttrMap a;
  a.set("dim", dim);
  return a;
}

AttrMap dims_attr(std::vector<int64_t> dims, bool keepdim) {
  AttrMap a;
  a.set("dims", dims);
  a.set("keepdim", keepdim);
  return a;
}

AttrMap layer_norm_attr(int64_t axis, double eps) {
  AttrMap a;
  a.set("axis", axis);
  a.set("eps", eps);
  return a;
}

// [rows, n] shapes: row lengths 1, 7, 64, 1000, 4097 (past the register cache of a 64- and a
// 256-lane team), many rows, rows shorter than a subgroup, lengths either side of a power of two.
const std::vector<std::pair<int64_t, int64_t>> kRowShapes = {
    {5, 1}, {300, 1}, {3, 7}, {513, 7}, {1000, 3}, {129, 2}, {4, 64}, {70, 64},
    {3, 1000}, {17, 1000}, {2, 4097}, {5, 4097}, {1, 33}, {9, 255}, {6, 257}};

// Param: subgroup arithmetic allowed.
class VulkanNorm : public testing::VulkanTemplateTest<::testing::TestWithParam<bool>> {
 protected:
  void SetUp() override {
    VulkanTemplateTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The CPU-device default (8 lanes on lavapipe: one SIMD vector) and a middle size, reading
    // through texel buffers as on CPU devices; then the GPU variant (256 lanes, storage-buffer
    // reads), planned as for a device that is not a CPU.
    for (int wg : {8, 64, 256}) {
      const vulkan::NormTemplateOptions options{.subgroups = GetParam(), .workgroup = wg};
      TemplatePlanner planner = [options, gpu = wg == 256](const OpRun& run, const DeviceCaps& caps) {
        DeviceCaps c = caps;
        if (gpu) c.is_cpu = false;
        return vulkan::norm_template_launch(run, c, options);
      };
      runners_.push_back(std::make_unique<EagerPrograms>(*vk_, EagerOptions{.templates = planner}));
    }
  }
  void TearDown() override {
    runners_.clear();
    VulkanTemplateTest::TearDown();
  }

  // Every runner's template against the cpu reference, one template launch and nothing else each.
  void check(const OpCase& c, const std::vector<std::vector<float>>& in, double atol, double rtol) {
    const std::vector<float> want = run_op(*cpu_, nullptr, c, in);
    for (auto& runner : runners_) {
      const EagerStats before = runner->stats();
      const std::vector<float> got = run_op(*vk_, runner.get(), c, in);
      EXPECT_EQ(runner->stats().template_launches, before.template_launches + 1) << c.name;
      EXPECT_EQ(runner->stats().launches, before.launches + 1) << c.name << ": one launch";
      expect_close(got, want, atol, rtol, c.name);
    }
  }

  std::vector<std::unique_ptr<EagerPrograms>> runners_;
};

// exp, the f32 row sum and one division: 1e-4 relative (the cpu reference works in double); an
// element read from the wrong place or a row summed twice is off by far more.
TEST_P(VulkanNorm, SoftmaxMatchesCpu) {
  uint32_t seed = 1;
  for (auto [rows, n] : kRowShapes) {
    const OpCase c{"softmax [" + std::to_string(rows) + "," + std::to_string(n) + "]", OpKind::Softmax,
                   dim_attr(-1), {{rows, n}}, {rows, n}};
    // Spread over [-8, 8] so exp's range matters and the max shift is exercised.
    check(c, {random_values(rows * n, seed++, -8.0f, 8.0f)}, 1e-8, 1e-4);
  }
}

// (x - max) - log(sum): values around -log(n); 1e-5 of their magnitude plus 1e-5.
TEST_P(VulkanNorm, LogSoftmaxMatchesCpu) {
  uint32_t seed = 100;
  for (auto [rows, n] : kRowShapes) {
    const OpCase c{"log_softmax [" + std::to_string(rows) + "," + std::to_string(n) + "]",
                   OpKind::LogSoftmax, dim_attr(1), {{rows, n}}, {rows, n}};
    check(c, {random_values(rows * n, seed++, -8.0f, 8.0f)}, 1e-5, 1e-5);
  }
}

// Higher ranks, a softmax dim followed only by size-1 dims, -inf entries (attention masks), an
// all -inf row and a NaN row (both NaN throughout in the reference).
TEST_P(VulkanNorm, SoftmaxRanksMasksAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = random_values(4 * 6 * 10, 7, -3.0f, 3.0f);
  for (int i = 0; i < 10; ++i) x[size_t(10 + i)] = -inf;  // row 1: all -inf
  x[25] = std::nanf("");                                  // row 2: one NaN
  for (size_t i = 30; i < x.size(); i += 3) x[i] = -inf;  // later rows: masked entries
  check({"softmax [4,6,10] masked", OpKind::Softmax, dim_attr(2), {{4, 6, 10}}, {4, 6, 10}}, {x}, 1e-8, 1e-4);
  check({"log_softmax [4,6,10] masked", OpKind::LogSoftmax, dim_attr(-1), {{4, 6, 10}}, {4, 6, 10}}, {x},
        1e-5, 1e-5);
  check({"softmax [3,5,1,1] dim 1", OpKind::Softmax, dim_attr(1), {{3, 5, 1, 1}}, {3, 5, 1, 1}},
        {random_values(15, 8)}, 1e-8, 1e-4);
  check({"softmax scalar", OpKind::Softmax, dim_attr(0), {{}}, {}}, {{0.3f}}, 0, 0);
}

// Sums of f32 with magnitudes <= 1.25: whatever the order, the error stays under n * 2^-24 of
// the sum of magnitudes over the longest chain (n / lanes + log2(lanes) adds); 1e-5 of that sum
// bounds it for these row lengths. Max and min are exact. Prod gets 2e-7 per factor relative.
TEST_P(VulkanNorm, ReductionsOverTheLastAxisMatchCpu) {
  uint32_t seed = 200;
  for (auto [rows, n] : kRowShapes) {
    const std::string shape = " [" + std::to_string(rows) + "," + std::to_string(n) + "]";
    std::vector<float> x = random_values(rows * n, seed++, 0.25f, 1.25f, true);
    double row_abs = 1.25 * double(n);
    check({"sum" + shape, OpKind::Sum, dims_attr({-1}, false), {{rows, n}}, {rows}}, {x}, 1e-5 * row_abs, 0);
    check({"mean" + shape, OpKind::Mean, dims_attr({1}, true), {{rows, n}}, {rows, 1}}, {x},
          1e-5 * row_abs / double(n), 0);
    check({"max" + shape, OpKind::ReduceMax, dims_attr({-1}, false), {{rows, n}}, {rows}}, {x}, 0, 0);
    check({"min" + shape, OpKind::ReduceMin, dims_attr({-1}, true), {{rows, n}}, {rows, 1}}, {x}, 0, 0);
    if (n <= 1000) {  // longer products of these magnitudes leave the f32 range
      std::vector<float> f = random_values(rows * n, seed++, 0.5f, 2.0f, true);
      check({"prod" + shape, OpKind::Prod, dims_attr({-1}, false), {{rows, n}}, {rows}}, {f}, 0,
            2e-7 * double(n) + 1e-6);
    }
  }
}

// Several trailing dims at once, every dim, size-1 dims between, NaN and infinities in max/min.
TEST_P(VulkanNorm, ReductionsOverTrailingDimsAndSpecialValues) {
  std::vector<float> x = random_values(3 * 4 * 50, 300, 0.25f, 1.25f, true);
  check({"sum [3,4,50] dims 1,2", OpKind::Sum, dims_attr({1, 2}, false), {{3, 4, 50}}, {3}}, {x}, 1e-5 * 250, 0);
  check({"mean [3,4,50] all dims", OpKind::Mean, dims_attr({}, false), {{3, 4, 50}}, {}}, {x}, 1e-5 * 1.25, 0);
  check({"max [3,1,50,1] dims 2,3", OpKind::ReduceMax, dims_attr({2, 3}, true), {{3, 1, 50, 1}}, {3, 1, 1, 1}},
        {std::vector<float>(x.begin(), x.begin() + 150)}, 0, 0);
  std::vector<float> s = random_values(4 * 9, 301);
  s[3] = std::nanf("");                              // row 0: NaN wins
  s[9 + 4] = std::numeric_limits<float>::infinity();  // row 1: +inf
  s[18 + 8] = -std::numeric_limits<float>::infinity();  // row 2: -inf
  check({"max [4,9] with NaN/inf", OpKind::ReduceMax, dims_attr({-1}, false), {{4, 9}}, {4}}, {s}, 0, 0);
  check({"min [4,9] with NaN/inf", OpKind::ReduceMin, dims_attr({-1}, false), {{4, 9}}, {4}}, {s}, 0, 0);
}

// Normalized values are O(1): 1e-5 relative to the input's offset from zero (the f32 mean and
// x - mean lose that much), of each value's magnitude plus 1e-5.
TEST_P(VulkanNorm, LayerNormMatchesCpuWithAndWithoutAffine) {
  uint32_t seed = 400;
  for (auto [rows, n] : kRowShapes) {
    for (int params = 0; params <= 2; ++params) {
      OpCase c{"layer_norm [" + std::to_string(rows) + "," + std::to_string(n) + "] params " +
                   std::to_string(params),
               OpKind::LayerNorm, layer_norm_attr(-1, 1e-5), {{rows, n}}, {rows, n}};
      std::vector<std::vector<float>> in = {random_values(rows * n, seed++, -2.0f, 2.0f)};
      for (int i = 0; i < params; ++i) {
        c.inputs.push_back({n});
        in.push_back(random_values(n, seed++));
      }
      check(c, in, 2e-5, 2e-5);
    }
  }
  // Several normalized dims, and a mean far from zero relative to the spread (two passes keep it).
  std::vector<float> x = random_values(2 * 3 * 50, 450, 99.0f, 101.0f);
  check({"layer_norm [2,3,50] axis 1 offset 100", OpKind::LayerNorm, layer_norm_attr(1, 1e-5),
         {{2, 3, 50}, {3, 50}, {3, 50}}, {2, 3, 50}},
        {x, random_values(150, 451), random_values(150, 452)}, 1e-3, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Variants, VulkanNorm, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "subgroups" : "shared_tree"; });

// The planner: the subgroup variant only where the device has subgroup arithmetic and a team fills
// the workgroup; reductions not over the innermost axis, f16 and empty tensors keep the lowering.
TEST(VulkanNormPlanner, ChoosesVariantsAndDeclinesWhatItDoesNotServe) {
  DeviceCaps caps;
  caps.subgroups = true;
  caps.subgroup_size = 32;
  caps.max_workgroup_invocations = 1024;
  caps.max_workgroup_size = {1024, 1024, 64};
  auto plan = [&](OpKind kind, const AttrMap& attrs, std::vector<int64_t> dims, std::vector<int64_t> out,
                  DType dtype = DType::F32, const vulkan::NormTemplateOptions& options = {}) {
    BufferView in{nullptr, dtype, dims}, o{nullptr, dtype, out};
    return vulkan::norm_template_launch(OpRun{kind, attrs, std::span(&in, 1), std::span(&o, 1)}, caps, options);
  };
  auto long_rows = plan(OpKind::Softmax, dim_attr(-1), {8, 1024}, {8, 1024});
  ASSERT_TRUE(long_rows);
  EXPECT_NE(long_rows->source.find("#define SUBGROUP 1"), std::string::npos);
  EXPECT_NE(long_rows->source.find("#define TEXEL 0"), std::string::npos);
  EXPECT_EQ(long_rows->groups[0], 8u);  // one 256-lane workgroup per row
  auto short_rows = plan(OpKind::Softmax, dim_attr(-1), {1000, 7}, {1000, 7});
  ASSERT_TRUE(short_rows);
  EXPECT_NE(short_rows->source.find("#define SUBGROUP 0"), std::string::npos);
  EXPECT_EQ(short_rows->groups[0], 32u);  // 8-lane teams, 32 rows per workgroup
  auto no_subgroups = plan(OpKind::Sum, dims_attr({-1}, false), {8, 1024}, {8}, DType::F32, {.subgroups = false});
  ASSERT_TRUE(no_subgroups);
  EXPECT_NE(no_subgroups->source.find("#define SUBGROUP 0"), std::string::npos);
  auto many_rows = plan(OpKind::Sum, dims_attr({-1}, false), {200000, 300}, {200000});
  ASSERT_TRUE(many_rows);
  EXPECT_EQ(many_rows->groups[0], 65535u);
  EXPECT_EQ(many_rows->groups[1], 4u);  // rows past 65535 workgroups spill into y

  EXPECT_FALSE(plan(OpKind::Softmax, dim_attr(0), {8, 16}, {8, 16}));
  EXPECT_FALSE(plan(OpKind::Sum, dims_attr({0}, false), {8, 16}, {16}));
  EXPECT_FALSE(plan(OpKind::Sum, dims_attr({1}, false), {8, 16, 4}, {8, 4}));
  EXPECT_FALSE(plan(OpKind::Softmax, dim_attr(-1), {8, 16}, {8, 16}, DType::F16));
  EXPECT_FALSE(plan(OpKind::Sum, dims_attr({-1}, false), {0, 16}, {0}));
  EXPECT_FALSE(plan(OpKind::Sum, dims_attr({-1}, false), {16, 0}, {16}));
  EXPECT_FALSE(plan(OpKind::ArgMax, dim_attr(-1), {8, 16}, {8}));
}

// The backend's own planner runs these ops as the templates; a reduction over a leading axis
// keeps the generic lowering and still matches.
TEST(VulkanNormBackend, EagerOpsUseTheTemplatesWhereTheyFit) {
  std::string why;
  if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Device vk = Device::parse("vulkan"), cpu = Device::cpu();
  auto& backend = dynamic_cast<vulkan::VulkanBackend&>(vk.backend());
  Tensor x = randn({16, 96}, vk, 5);
  size_t before = backend.eager_stats().template_launches;
  std::vector<float> got = softmax(x, -1).to_vector<float>();
  EXPECT_EQ(backend.eager_stats().template_launches, before + 1);
  expect_close(got, softmax(x.to(cpu), -1).to_vector<float>(), 1e-8, 1e-4, "softmax through the backend");
  before = backend.eager_stats().template_launches;
  got = sum(x, {0}).to_vector<float>();
  EXPECT_EQ(backend.eager_stats().template_launches, before);
  expect_close(got, sum(x.to(cpu), {0}).to_vector<float>(), 1e-4, 0, "sum over dim 0 (generic)");
}

Graph parse_checked(const std::string& text) {
  Graph g = parse_graph(text);
  verify_graph_or_throw(g);
  return g;
}

// A compiled program: lone softmax, layer_norm and sum groups launch the templates; the result
// matches the interpreter on cpu.
TEST(VulkanNormBackend, CompiledProgramRunsRowOpsWithTheTemplates) {
  std::string why;
  if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Graph g = parse_checked(R"(graph @main(%0: f32[6,40] "x", %1: f32[40] "w", %2: f32[40] "b") {
  %3: f32[6,40] = layer_norm(%0, %1, %2) {axis=-1, eps=1e-05}
  %4: f32[6,40] = softmax(%3) {dim=-1}
  %5: f32[6] = sum(%4) {dims=[-1], keepdim=false}
  %6: f32[6] = mul(%5, %5)
  return %4, %6
})");
  Device vk = Device::parse("vulkan");
  PlannedProgram program(g, vk);
  std::vector<Tensor> cpu_in = {randn({6, 40}, Device::cpu(), 11), randn({40}, Device::cpu(), 12),
                                randn({40}, Device::cpu(), 13)};
  std::vector<Tensor> vk_in;
  for (const Tensor& t : cpu_in) vk_in.push_back(t.to(vk));
  std::vector<Tensor> got = run_program(program, vk_in);
  std::vector<Tensor> want = interpret(g, cpu_in);
  expect_close(got[0].to_vector<float>(), want[0].to_vector<float>(), 1e-7, 1e-4, "softmax(layer_norm)");
  expect_close(got[1].to_vector<float>(), want[1].to_vector<float>(), 1e-5, 1e-5, "sum(softmax)^2");
  std::vector<std::string> templates;
  for (const PlannedLaunch& l : program.launches())
    if (l.is_template) templates.push_back(l.name);
  EXPECT_EQ(templates, (std::vector<std::string>{"layer_norm_rows_f32_w_b", "softmax_rows_f32", "sum_rows_f32"}));
}

}  // namespace
}  // namespace kiln
