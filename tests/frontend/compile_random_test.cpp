// Random numbers inside compiled functions: rand and Dropout draw from a generator counter that
// the program reads at each call and writes back, so every call draws new values, the same ones
// the same calls draw eagerly (the oracle: those eager calls, compared exactly or, for training
// steps, within 1e-5 relative on cpu and 1e-4 on Vulkan).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <kiln/kiln.h>

#include "core/trace/bundle.h"
#include "frontend/train_steps.h"
#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

std::vector<float> floats(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

void check_rand_calls(Device device) {
  manual_seed(11);
  const std::vector<float> first = floats(rand({4, 5}, device)), second = floats(rand({4, 5}, device));
  EXPECT_NE(first, second);
  for (float v : first) {
    EXPECT_GT(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  manual_seed(11);
  auto f = compile([](const Tensor& x) { return x + rand(x.shape(), x.device()); }, {.fullgraph = true});
  const Tensor zero = zeros({4, 5}, device);
  EXPECT_EQ(floats(f(zero)), first);
  EXPECT_EQ(floats(f(zero)), second);
  EXPECT_EQ(f.stats().compiles, 1);
  // randn too: Box-Muller on the generator's draws.
  manual_seed(12);
  const std::vector<float> normal = floats(randn({64}, device));
  manual_seed(12);
  auto g = compile([](const Tensor& x) { return x + randn(x.shape(), x.device()); });
  const Tensor zero64 = zeros({64}, device);
  const std::vector<float> compiled_normal = floats(g(zero64));
  for (size_t i = 0; i < normal.size(); ++i) EXPECT_NEAR(compiled_normal[i], normal[i], 1e-5 * (1 + std::abs(normal[i])));
  EXPECT_NE(floats(g(zero64)), compiled_normal);
  // The draw fuses with its consumers: the mask and the multiply are one kernel, named for both
  // (the counter's increment is another; past 2^16 elements no horizontal kernel joins the two).
  auto masked = compile([](const Tensor& x) { return x * cast(ge(rand(x.shape(), x.device()), 0.5), DType::F32); });
  masked(zeros({300, 300}, device));
  bool fused = false;
  for (const trace::BundleKernel& k : masked.bundle().kernels)
    fused = fused || (k.name.find("rand_uniform") != std::string::npos && k.name.find("mul") != std::string::npos);
  EXPECT_TRUE(fused) << "no kernel computes both the draw and the multiply";
  // A seed fixes the values: every call the same, on every device.
  auto seeded = compile([](const Tensor& x) { return x + rand(x.shape(), x.device(), 7); });
  const std::vector<float> fixed = floats(rand({4, 5}, Device::ref(), 7));
  EXPECT_EQ(floats(seeded(zero)), fixed);
  EXPECT_EQ(floats(seeded(zero)), fixed);
}

TEST(CompileRandom, RandDrawsNewValuesEachCallTheOnesEagerCallsDraw) { check_rand_calls(Device::cpu()); }

TEST(CompileRandom, RandDrawsNewValuesEachCallTheOnesEagerCallsDrawOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  check_rand_calls(vk);
}

struct Net {
  explicit Net(Device d) : a(8, 16, true, d, /*seed=*/1), drop(0.3, /*seed=*/5), b(16, 4, true, d, 2) {
    for (Tensor* p : parameters()) p->requires_grad_();
  }
  Tensor loss(const Tensor& x, const Tensor& y) { return cross_entropy(b(drop(gelu(a(x)))), y); }
  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> out = a.parameters();
    for (Tensor* p : b.parameters()) out.push_back(p);
    return out;
  }
  nn::Linear a;
  nn::Dropout drop;
  nn::Linear b;
};

void expect_close(const Tensor& actual, const Tensor& expected, double tol, const std::string& what) {
  const std::vector<float> a = floats(actual), e = floats(expected);
  ASSERT_EQ(a.size(), e.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::abs(a[i] - e[i]), tol * (1 + std::abs(e[i]))) << what << " element " << i;
}

// Two copies of a net with a seeded Dropout: one trained eagerly, one by a step compiled whole.
void check_dropout_training(Device device, double tol) {
  Net eager_net(device), compiled_net(device);
  optim::SGD eager_opt(eager_net.parameters(), {.lr = 0.1});
  optim::SGD opt(compiled_net.parameters(), {.lr = 0.1});
  auto step = compiled_step(compiled_net, opt);
  const std::vector<int64_t> batches = {4, 4, 6, 5};
  for (size_t s = 0; s < batches.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const int64_t n = batches[s];
    Tensor x = randn({n, 8}, device, 100 + s);
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < n; ++i) labels.push_back((i + int64_t(s)) % 4);
    Tensor y = from_vector(labels, {n}, device);
    Tensor eager_loss = eager_step(eager_net, eager_opt, x, y);
    expect_close(step(x, y), eager_loss, tol, "loss");
    const std::vector<Tensor*> mine = compiled_net.parameters(), theirs = eager_net.parameters();
    for (size_t k = 0; k < mine.size(); ++k)
      expect_close(*mine[k], *theirs[k], tol, "parameter " + std::to_string(k));
  }
  EXPECT_EQ(step.stats().graph_breaks, 0);
  EXPECT_LE(step.stats().compiles, 2);
  // The mask changes from call to call: in training mode two calls on the same input differ.
  Tensor h = ones({2, 64}, device);
  EXPECT_NE(floats(compiled_net.drop(h)), floats(compiled_net.drop(h)));
}

TEST(CompileRandom, DropoutTrainingStepsMatchEagerSteps) { check_dropout_training(Device::cpu(), 1e-5); }

TEST(CompileRandom, DropoutTrainingStepsMatchEagerStepsOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  check_dropout_training(vk, 1e-4);
}

}  // namespace
}  // namespace kiln
