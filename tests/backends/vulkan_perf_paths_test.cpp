// The fast paths of eager Vulkan: the tiled matmul template (every variant it picks, against the cpu
// reference) and asynchronous launches (no wait per op, buffers freed while queued stay valid), all
// under the Khronos validation layer with zero messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_templates.h"
#include "core/kiln.h"
#include "support/vulkan_template_test.h"

namespace kiln {
namespace {

using testing::expect_close_sums;

struct HostFloats {
  std::vector<float> data;
  std::vector<int64_t> dims;
};

HostFloats random_tensor(std::vector<int64_t> dims, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  HostFloats t{std::vector<float>(size_t(n)), std::move(dims)};
  for (float& v : t.data) v = dist(gen);
  return t;
}

// Runs one op on `backend` through `execute` (cpu) or `runner` (Vulkan), host data in and out.
std::vector<float> run_on(Backend& backend, EagerPrograms* runner, OpKind kind, const AttrMap& attrs,
                          const std::vector<HostFloats>& inputs, const std::vector<int64_t>& out_dims) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<BufferView> in_views;
  for (const HostFloats& t : inputs) {
    buffers.push_back(backend.alloc(std::max<size_t>(t.data.size() * 4, 4)));
    backend.upload(*buffers.back(), t.data.data(), t.data.size() * 4);
    in_views.push_back({buffers.back().get(), DType::F32, t.dims});
  }
  int64_t out_n = 1;
  for (int64_t d : out_dims) out_n *= d;
  auto out = backend.alloc(std::max<size_t>(size_t(out_n) * 4, 4));
  BufferView out_view{out.get(), DType::F32, out_dims};
  OpRun run{kind, attrs, in_views, std::span(&out_view, 1)};
  if (runner) {
    runner->run(run);
    runner->sync();
  } else {
    run_on_backend(backend, run);
  }
  std::vector<float> result(static_cast<size_t>(out_n));
  backend.download(*out, result.data(), result.size() * 4);
  return result;
}

// f32 products over K terms of values in [-1, 1]: the error grows with K; 2e-6 * K leaves room for a
// different summation order while any indexing mistake is off by O(1).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t k,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = 1e-5 + 2e-6 * double(k);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(double(want[i])))) << what << " at " << i;
}

class VulkanPerfPaths : public testing::VulkanTemplateTest<::testing::TestWithParam<vulkan::MatmulTile>> {
 protected:
  void SetUp() override {
    VulkanTemplateTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // Every problem, however small, takes the template with the tile under test.
    runner_ = std::make_unique<EagerPrograms>(
        *vk_,
        EagerOptions{.templates = vulkan::glsl_template_planner(
                         {.matmul_min_flops = 0, .force_tile = true, .tile = GetParam()})});
  }
  void TearDown() override {
    runner_.reset();
    VulkanTemplateTest::TearDown();
  }

  // Template on Vulkan vs the cpu reference; also checks the template (not the lowering) ran.
  void check(OpKind kind, const AttrMap& attrs, const std::vector<HostFloats>& in,
             const std::vector<int64_t>& out_dims, int64_t k, const std::string& what) {
    size_t before = runner_->stats().template_launches;
    std::vector<float> got = run_on(*vk_, runner_.get(), kind, attrs, in, out_dims);
    std::vector<float> want = run_on(*cpu_, nullptr, kind, attrs, in, out_dims);
    int64_t out_n = 1;
    for (int64_t d : out_dims) out_n *= d;
    if (out_n > 0) EXPECT_EQ(runner_->stats().template_launches, before + 1) << what;
    expect_close(got, want, k, what);
  }

  std::unique_ptr<EagerPrograms> runner_;
};

TEST_P(VulkanPerfPaths, MatmulTemplateMatchesCpuOnSizesThatAreNotTileMultiples) {
  const int64_t sizes[] = {1, 17, 64, 100, 257};
  uint32_t seed = 1;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        if (m * n * k > 64 * 100 * 257) continue;  // the largest cubes add time, not coverage
        check(OpKind::MatMul, {}, {random_tensor({m, k}, seed++), random_tensor({k, n}, seed++)},
              {m, n}, k, "matmul " + std::to_string(m) + "x" + std::to_string(k) + " @ " +
                             std::to_string(k) + "x" + std::to_string(n));
      }
  check(OpKind::MatMul, {}, {random_tensor({257, 257}, 7), random_tensor({257, 257}, 8)}, {257, 257},
        257, "matmul 257^3");
}

TEST_P(VulkanPerfPaths, MatmulTemplateBroadcastsBatchesAndVectorsLikeNumpy) {
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  const Case cases[] = {
      {{3, 17, 33}, {3, 33, 20}, {3, 17, 20}},              // plain batch
      {{5, 17, 33}, {33, 20}, {5, 17, 20}},                 // B shared by every batch
      {{33, 20}, {4, 20, 65}, {4, 33, 65}},                 // A shared
      {{2, 1, 17, 33}, {1, 4, 33, 20}, {2, 4, 17, 20}},     // two broadcast batch dims
      {{2, 3, 17, 33}, {2, 3, 33, 20}, {2, 3, 17, 20}},     // two batch dims that merge
      {{33}, {3, 33, 20}, {3, 20}},                         // 1-d A
      {{3, 17, 33}, {33}, {3, 17}},                         // 1-d B
      {{0, 17, 33}, {33, 20}, {0, 17, 20}},                 // empty batch: nothing to launch
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    std::string what = "matmul " + shape_str(make_shape(c.a)) + " @ " + shape_str(make_shape(c.b));
    check(OpKind::MatMul, {}, {random_tensor(c.a, seed++), random_tensor(c.b, seed++)}, c.out,
          c.a.back(), what);
  }
}

TEST_P(VulkanPerfPaths, LinearTemplateReadsTransposedWeightAndAddsBias) {
  check(OpKind::Linear, {}, {random_tensor({4, 17, 100}, 1), random_tensor({65, 100}, 2)}, {4, 17, 65},
        100, "linear without bias");
  check(OpKind::Linear, {},
        {random_tensor({4, 17, 100}, 3), random_tensor({65, 100}, 4), random_tensor({65}, 5)},
        {4, 17, 65}, 100, "linear with bias [N]");
  check(OpKind::Linear, {}, {random_tensor({257}, 6), random_tensor({64, 257}, 7), random_tensor({1}, 8)},
        {64}, 257, "linear of a vector, bias [1]");
}

TEST_P(VulkanPerfPaths, GemmTemplateHandlesTransposesAlphaBetaAndBroadcastC) {
  const int64_t m = 37, n = 70, k = 100;
  uint32_t seed = 200;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const std::vector<int64_t>& c_dims :
           std::vector<std::vector<int64_t>>{{m, n}, {n}, {m, 1}, {}, {1, n}}) {
        AttrMap attrs{{"trans_a", ta}, {"trans_b", tb}, {"alpha", 0.5}, {"beta", 2.0}};
        std::vector<int64_t> a_dims = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
        std::vector<int64_t> b_dims = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
        std::string what = std::string("gemm ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0") +
                           " C" + shape_str(make_shape(c_dims));
        check(OpKind::Gemm, attrs,
              {random_tensor(a_dims, seed++), random_tensor(b_dims, seed++), random_tensor(c_dims, seed++)},
              {m, n}, k, what);
      }
  AttrMap no_c{{"trans_a", false}, {"trans_b", true}, {"alpha", 1.0}, {"beta", 0.0}};
  check(OpKind::Gemm, no_c, {random_tensor({m, k}, 1), random_tensor({n, k}, 2), random_tensor({m, n}, 3)},
        {m, n}, k, "gemm with beta 0 ignores C");
}

INSTANTIATE_TEST_SUITE_P(
    Tiles, VulkanPerfPaths,
    ::testing::Values(vulkan::MatmulTile{64, 64, 16, 4, 4, true},   // shared memory, GPU default
                      vulkan::MatmulTile{64, 64, 16, 8, 4, true},   // shared, taller register tile
                      vulkan::MatmulTile{32, 32, 16, 4, 4, false},  // direct loads (CPU devices)
                      vulkan::MatmulTile{64, 64, 16, 8, 8, false},
                      // Texel-buffer reads and vec4 loads; vec4 falls back to scalar loads where
                      // K or N is not a multiple of 4 or A is transposed, so both paths run here.
                      vulkan::MatmulTile{64, 64, 16, 4, 4, true, true, false},
                      vulkan::MatmulTile{64, 64, 16, 8, 8, false, true, false},
                      vulkan::MatmulTile{64, 64, 16, 8, 8, false, false, true},
                      vulkan::MatmulTile{32, 64, 16, 4, 8, false, true, true}),
    [](const auto& info) {
      const vulkan::MatmulTile& t = info.param;
      return std::string(t.shared ? "shared" : "direct") + "_" + std::to_string(t.bm) + "x" +
             std::to_string(t.bn) + "_" + std::to_string(t.tm) + "x" + std::to_string(t.tn) +
             (t.texel ? "_texel" : "") + (t.vec4 ? "_vec4" : "");
    });

// Through the public API: the backend's own runner picks the template for a big enough f32 matmul
// and leaves small or non-f32 ones to the generic lowering.
TEST(VulkanEager, BackendUsesMatmulTemplateOnlyForBigF32Products) {
  std::string why;
  if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Device vk = Device::parse("vulkan");
  auto& backend = dynamic_cast<vulkan::VulkanBackend&>(vk.backend());
  vulkan::clear_validation_messages();
  Tensor a = randn({96, 130}, vk), b = randn({130, 80}, vk);
  size_t before = backend.eager_stats().template_launches;
  std::vector<float> got = matmul(a, b).to_vector<float>();
  EXPECT_EQ(backend.eager_stats().template_launches, before + 1);
  std::vector<float> want = matmul(a.to(Device::cpu()), b.to(Device::cpu())).to_vector<float>();
  expect_close(got, want, 130, "matmul 96x130x80 through the backend");

  before = backend.eager_stats().template_launches;
  Tensor small = matmul(randn({4, 4}, vk), randn({4, 4}, vk));
  Tensor ints = matmul(ones({64, 64}, DType::I32, vk), ones({64, 64}, DType::I32, vk));
  EXPECT_EQ(ints.to_vector<int32_t>()[0], 64);
  (void)small.to_vector<float>();
  EXPECT_EQ(backend.eager_stats().template_launches, before);
  EXPECT_TRUE(vulkan::validation_messages().empty());
}

// A chain of ops queues without waiting; freeing intermediates (and scalar operands) while their
// launches are queued is safe, and only reading the result waits.
TEST(VulkanEager, OpsQueueWithoutWaitingAndFreedBuffersOutliveTheirLaunches) {
  std::string why;
  if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Device vk = Device::parse("vulkan");
  auto& backend = dynamic_cast<vulkan::VulkanBackend&>(vk.backend());
  backend.sync_eager();
  vulkan::clear_validation_messages();
  std::vector<float> x_host(4096);
  for (size_t i = 0; i < x_host.size(); ++i) x_host[i] = float(i % 97) * 0.01f;
  Tensor x = from_vector(x_host, vk);
  EagerStats before = backend.eager_stats();
  Tensor y = x;
  const int ops = 300;  // more than one command batch (128 launches) to cover the rotation too
  for (int i = 0; i < ops; ++i) y = add(mul(y, 0.5), x);  // each step frees the previous y
  EagerStats queued = backend.eager_stats();
  EXPECT_EQ(queued.syncs, before.syncs) << "no op may wait for the device";
  EXPECT_GE(queued.launches - before.launches, size_t(2 * ops));
  std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(backend.eager_stats().syncs, before.syncs + 1) << "reading the result waits once";
  // y converges to 2x: y_{i+1} = y_i / 2 + x with y_0 = x, so y_n = x (2 - 2^-n).
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], 2.0f * x_host[i], 1e-5f) << i;
  auto messages = vulkan::validation_messages();
  EXPECT_TRUE(messages.empty()) << messages.size() << " validation message(s), first: "
                                << (messages.empty() ? "" : messages.front());
}

// vec4 pointwise kernels (software devices) store whole vec4s, also at a tensor's end: every length
// that leaves 1, 2 or 3 elements over, with a broadcast operand read per element, eager and inside a
// compiled program whose small intermediates sit next to each other in one arena, matches the cpu
// reference and leaves every neighbour intact.
TEST(VulkanEager, Vec4PointwiseKernelsHandleEveryTailAndKeepNeighboursIntact) {
  std::string why;
  if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Device vk = Device::parse("vulkan");
  if (!vk.backend().caps().is_cpu) GTEST_SKIP() << "vec4 pointwise kernels are a software-device path";
  vulkan::clear_validation_messages();
  auto chain = [](const Tensor& x, const Tensor& row) -> std::vector<Tensor> {
    Tensor a = relu(x * row + 0.25);  // row broadcasts over x's leading dim
    Tensor b = a - x;
    Tensor c = tanh(b) * 3.0;
    return {a, b + c, exp(c * 0.1) - a};
  };
  auto fast = compile(chain);
  for (int64_t n : {1, 2, 3, 5, 6, 7, 9, 13, 4097}) {
    Tensor x = randn({3, n}, Device::cpu(), uint64_t(n)), row = randn({n}, Device::cpu(), uint64_t(n) + 100);
    std::vector<Tensor> want = chain(x, row);
    std::vector<Tensor> eager = chain(x.to(vk), row.to(vk));
    std::vector<Tensor> compiled = fast(x.to(vk), row.to(vk));
    for (size_t o = 0; o < want.size(); ++o) {
      const std::vector<float> w = want[o].to_vector<float>();
      const std::vector<float> e = eager[o].to_vector<float>(), c = compiled[o].to_vector<float>();
      ASSERT_EQ(e.size(), w.size());
      ASSERT_EQ(c.size(), w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        ASSERT_NEAR(e[i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << "eager output " << o << ", n " << n << ", " << i;
        ASSERT_NEAR(c[i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << "compiled output " << o << ", n " << n << ", " << i;
      }
    }
  }
  auto messages = vulkan::validation_messages();
  EXPECT_TRUE(messages.empty()) << messages.size() << " validation message(s), first: "
                                << (messages.empty() ? "" : messages.front());
}

// Writing new data into a buffer that a queued launch still reads waits for that launch first.
TEST(VulkanEager, UploadIntoABufferAQueuedLaunchReadsWaitsForIt) {
  std::string why;
  if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  Device vk = Device::parse("vulkan");
  Backend& backend = vk.backend();
  Tensor x = from_vector(std::vector<float>(1024, 1.0f), vk);
  Tensor y = add(x, x);  // queued, reads x
  std::vector<float> twos(1024, 5.0f);
  backend.upload(*x.impl().buffer, twos.data(), twos.size() * 4);
  EXPECT_EQ(y.to_vector<float>()[1000], 2.0f) << "the queued add must see x before the upload";
  EXPECT_EQ(x.to_vector<float>()[1000], 5.0f);
}

}  // namespace
}  // namespace kiln
