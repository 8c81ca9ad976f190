// Eager autograd: requires_grad_, backward, grad, accumulation, NoGradGuard, detach and kiln::grad,
// checked against derivatives worked out by hand and against central differences in f64 on the
// cpu reference; the same backward on Vulkan (lavapipe) matches the cpu within f32 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <kiln/kiln.h>

#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

Tensor f64(const std::vector<double>& v, const Dims& shape, Device device = Device::cpu()) {
  return from_vector(v, shape, device);
}

// d/dx sum(x * x) = 2x; a second backward adds the same again.
TEST(Autograd, BackwardOfASquareSumGivesTwiceTheInputAndAccumulates) {
  Tensor x = f64({1, -2, 3}, {3});
  x.requires_grad_();
  Tensor loss = sum(x * x);
  EXPECT_TRUE(loss.requires_grad());
  EXPECT_FALSE(x.grad().defined());
  loss.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, -4, 6}));
  sum(x * x).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4, -8, 12}));
}

// The backward of a compiled function runs a compiled gradient program per graph; only the one that
// ran last keeps its intermediates (its arena), so a backward of another graph frees the first
// one's, and running the first again plans them anew.
TEST(Autograd, OnlyTheBackwardThatRanLastKeepsItsIntermediates) {
  const Device device = Device::cpu();
  Tensor x = randn({512, 512}, device, 1).requires_grad_();
  auto big_loss = compile([](const Tensor& x) {  // a gradient graph with several 1 MiB intermediates
    const Tensor y = x * 1.5;
    return sum(tanh(matmul(y, y)) * y);
  });
  auto small_loss = compile([](const Tensor& x) { return sum(x * 2.0); });
  auto big = [&] { big_loss(x).backward(); };
  auto small = [&] { small_loss(x).backward(); };
  big();
  const int64_t after_big = device.memory_stats().allocated_bytes;
  small();
  const int64_t after_small = device.memory_stats().allocated_bytes;
  EXPECT_LT(after_small, after_big - (int64_t(1) << 20)) << "the first backward's arena was kept";
  big();
  // The arena comes back at its size (scalars of a few bytes may differ between the two states).
  EXPECT_NEAR(double(device.memory_stats().allocated_bytes), double(after_big), 4096.0);
}

// An eager backward on cpu runs its gradient graph node by node and lets each value go after its
// last reader: the backward of a chain of 16 tanh layers over 1 MiB activations holds a few of its
// gradients at once, not all of them (68 MB when the walk kept every value).
TEST(Autograd, EagerBackwardOnCpuHoldsFewIntermediatesAtOnce) {
  const Device device = Device::cpu();
  Tensor x = randn({256, 1024}, device, 3).requires_grad_();
  Tensor y = x;
  for (int layer = 0; layer < 16; ++layer) y = tanh(y) * 1.01;
  Tensor loss = sum(y);
  const int64_t before = device.memory_stats().allocated_bytes;
  device.reset_peak_memory();
  loss.backward();
  const int64_t mib = int64_t(1) << 20;
  EXPECT_LT(device.memory_stats().peak_allocated_bytes - before, 12 * mib);
  Tensor expected = ones({256, 1024}, DType::F32, device);  // d/dx by the chain rule, layer by layer
  Tensor z = x.detach();
  std::vector<Tensor> activations;
  for (int layer = 0; layer < 16; ++layer) {
    activations.push_back(z);
    z = tanh(z) * 1.01;
  }
  for (int layer = 15; layer >= 0; --layer) {
    const Tensor t = tanh(activations[size_t(layer)]);
    expected = expected * (1 - t * t) * 1.01;
  }
  const std::vector<double> got = values(x.grad()), want = values(expected);
  for (size_t i = 0; i < got.size(); i += 997) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
}

// y = x W^T + b, L = sum(y): dL/dW[o][i] = sum over rows of x[:, i]; dL/db = rows; dL/dx = sum_o W[o].
TEST(Autograd, LinearGradientsMatchTheHandDerivation) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = f64({1, 0, -1, 2, 1, 0}, {2, 3});
  Tensor b = f64({0.5, -0.5}, {2});
  w.requires_grad_();
  b.requires_grad_();
  sum(linear(x, w, b)).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{5, 7, 9, 5, 7, 9}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{2, 2}));
  EXPECT_FALSE(x.grad().defined()) << "x does not require grad";
  EXPECT_FALSE(x.requires_grad());
}

// A two-layer net with a shared input, broadcasting and a mean: every leaf's gradient against
// central differences of the loss in f64.
double loss_of(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
  Tensor h = gelu(linear(x, w1, b1));
  Tensor y = tanh(matmul(h, w2)) * sum(x, {1}, true);  // x read twice
  return values(mean(y * y))[0];
}

TEST(Autograd, TwoLayerNetGradientsMatchCentralDifferences) {
  Tensor x = randn({4, 3}, Device::cpu(), 1).to(DType::F64);
  Tensor w1 = randn({5, 3}, Device::cpu(), 2).to(DType::F64);
  Tensor b1 = randn({5}, Device::cpu(), 3).to(DType::F64);
  Tensor w2 = randn({5, 2}, Device::cpu(), 4).to(DType::F64);
  std::vector<Tensor*> leaves = {&x, &w1, &b1, &w2};
  for (Tensor* t : leaves) t->requires_grad_();
  Tensor h = gelu(linear(x, w1, b1));
  Tensor y = tanh(matmul(h, w2)) * sum(x, {1}, true);
  mean(y * y).backward();
  const double eps = 1e-6;
  NoGradGuard no_grad;
  for (Tensor* leaf : leaves) {
    std::vector<double> base = values(*leaf), analytic = values(leaf->grad());
    ASSERT_EQ(analytic.size(), base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      auto at = [&](double d) {
        std::vector<double> v = base;
        v[i] += d;
        Tensor moved = f64(v, Dims(leaf->sizes()));
        Tensor args[4] = {x, w1, b1, w2};
        for (size_t k = 0; k < 4; ++k)
          if (leaves[k] == leaf) args[k] = moved;
        return loss_of(args[0], args[1], args[2], args[3]);
      };
      double numeric = (at(eps) - at(-eps)) / (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << "element " << i;
    }
  }
}

TEST(Autograd, BackwardWithAGradientOfTheTensorsShape) {
  Tensor x = f64({1, 2, 3}, {3});
  x.requires_grad_();
  Tensor y = exp(x);
  y.backward(f64({1, 0, 2}, {3}));
  std::vector<double> g = values(x.grad());
  EXPECT_NEAR(g[0], std::exp(1.0), 1e-12);
  EXPECT_EQ(g[1], 0);
  EXPECT_NEAR(g[2], 2 * std::exp(3.0), 1e-12);
}

TEST(Autograd, GradReturnsGradientsOfIntermediatesWithoutAccumulating) {
  Tensor x = f64({0.5, 1.5}, {2});
  x.requires_grad_();
  Tensor h = x * x;
  Tensor loss = sum(sin(h));
  std::vector<Tensor> g = grad({loss}, {h, x});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NEAR(values(g[0])[1], std::cos(2.25), 1e-12);            // d/dh sin(h)
  EXPECT_NEAR(values(g[1])[1], std::cos(2.25) * 3.0, 1e-12);      // chain rule through h = x^2
  EXPECT_FALSE(x.grad().defined()) << "kiln::grad returns, it does not accumulate";
}

TEST(Autograd, NoGradGuardAndDetachRecordNothing) {
  Tensor x = f64({1, 2}, {2});
  x.requires_grad_();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE((x * 2.0).requires_grad());
  }
  EXPECT_TRUE((x * 2.0).requires_grad());
  Tensor d = (x * 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(values(d), (std::vector<double>{2, 4}));
  Tensor plain = f64({1, 2}, {2});
  EXPECT_FALSE((plain * plain).requires_grad()) << "ops on tensors without grad record nothing";
  // No gradient flows through a comparison.
  EXPECT_FALSE(gt(x, plain).requires_grad());
}

TEST(Autograd, BadCallsNameTheCallersLine) {
  Tensor x = f64({1, 2, 3}, {3});
  x.requires_grad_();
  Tensor y = x * 2.0;
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("autograd_test.cpp:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("needs backward(gradient)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sum(f64({1}, {1})).backward(), Error);  // nothing requires grad
  Tensor ints = from_vector(std::vector<int32_t>{1, 2}, {2});
  EXPECT_THROW(ints.requires_grad_(), Error);
  EXPECT_THROW(y.backward(f64({1, 2}, {2})), Error);  // gradient of the wrong shape
  // The process is still usable: a correct backward works after the errors.
  y.backward(f64({1, 1, 1}, {3}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2, 2}));
}

// A small CNN through the eager API (conv, batch norm in inference form, relu, max pool, avg
// pool): every leaf's gradient against central differences in f64.
Tensor cnn_loss(const std::vector<Tensor>& p) {
  Tensor h = relu(batch_norm(conv2d(p[0], p[1], p[2], 1, 1), p[3], p[4], p[5], p[6]));
  Tensor y = avg_pool2d(max_pool2d(h, 2), 2);
  return sum(y * y);
}

TEST(Autograd, SmallCnnGradientsMatchCentralDifferences) {
  std::vector<Tensor> p = {randn({2, 2, 8, 8}, Device::cpu(), 1), randn({3, 2, 3, 3}, Device::cpu(), 2),
                           randn({3}, Device::cpu(), 3), randn({3}, Device::cpu(), 4),
                           rand({3}, Device::cpu(), 5) + 0.5, randn({3}, Device::cpu(), 6),
                           randn({3}, Device::cpu(), 7)};
  for (Tensor& t : p) t = t.to(DType::F64).requires_grad_();
  const std::vector<Tensor> analytic = grad({cnn_loss(p)}, p);
  const double eps = 1e-6;
  NoGradGuard no_grad;
  for (size_t k = 0; k < p.size(); ++k) {
    std::vector<double> base = values(p[k]), g = values(analytic[k]);
    ASSERT_EQ(g.size(), base.size());
    for (size_t i = 0; i < base.size(); i += 1 + base.size() / 40) {  // about 40 elements of each
      auto at = [&](double d) {
        std::vector<double> v = base;
        v[i] += d;
        std::vector<Tensor> moved = p;
        moved[k] = f64(v, Dims(p[k].sizes()));
        return values(cnn_loss(moved))[0];
      };
      const double numeric = (at(eps) - at(-eps)) / (2 * eps);
      EXPECT_NEAR(g[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << "leaf " << k << " element " << i;
    }
  }
}

// The same backward on Vulkan as on the cpu reference (f32, relative 1e-4).
TEST(Autograd, VulkanGradientsMatchTheCpuReference) {
  KILN_REQUIRE_VULKAN(vk);
  auto grads_on = [](Device device) {
    Tensor x = randn({8, 16}, Device::cpu(), 1).to(device);
    Tensor w = randn({32, 16}, Device::cpu(), 2).to(device);
    Tensor b = randn({32}, Device::cpu(), 3).to(device);
    w.requires_grad_();
    b.requires_grad_();
    Tensor logits = linear(relu(x), w, b);
    mean(log_softmax(logits, 1) * -1.0).backward();
    return std::vector<std::vector<float>>{w.grad().to_vector<float>(), b.grad().to_vector<float>()};
  };
  auto cpu = grads_on(Device::cpu());
  auto gpu = grads_on(vk);
  testing::expect_close(gpu[0], cpu[0], 1e-4f, 1e-6f);
  testing::expect_close(gpu[1], cpu[1], 1e-4f, 1e-6f);
}

}  // namespace
}  // namespace kiln
