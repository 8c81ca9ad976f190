// Differentiating through kiln::compile: a compiled forward whose inputs, captured weights or
// module parameters require grad gives outputs that backward() differentiates, with the same
// gradients as the same function run eagerly (the oracle), on cpu and on Vulkan (lavapipe), with
// changing batch sizes and graph breaks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to_vector<double>(); }

// Relative 1e-5 on cpu (the same reference kernels in another order), 1e-4 on Vulkan.
void expect_close(const Tensor& actual, const Tensor& expected, double tol, const char* what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.type().str(), expected.type().str()) << what;
  std::vector<double> a = values(actual), e = values(expected);
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::abs(a[i] - e[i]), tol * (scale + std::abs(e[i])) + 1e-7) << what << " element " << i;
}

struct TwoLayer {
  explicit TwoLayer(Device d)
      : w1(randn({16, 8}, d, 1) * 0.3), b1(randn({16}, d, 2)), w2(randn({4, 16}, d, 3) * 0.3) {
    for (Tensor* t : {&w1, &b1, &w2}) t->requires_grad_();
  }
  Tensor forward(const Tensor& x) const { return linear(gelu(linear(x, w1, b1)), w2); }
  void clear() {
    for (Tensor* t : {&w1, &b1, &w2}) t->impl().grad.reset();
  }
  Tensor w1, b1, w2;
};

// Captured weights: f(x) = sum(tanh(net(x))), compiled, then backward.
void check_captured_weights(Device device, double tol, double memory_budget = 0) {
  TwoLayer net(device);
  auto fn = [&net](const Tensor& x) { return sum(tanh(net.forward(x))); };
  auto compiled = compile(fn, {.fullgraph = true, .memory_budget = memory_budget});
  for (int64_t batch : {3, 5, 7}) {  // the second size recompiles with a symbolic batch
    SCOPED_TRACE("batch " + std::to_string(batch));
    Tensor x = randn({batch, 8}, device, uint64_t(10 + batch));
    net.clear();
    fn(x).backward();
    const std::vector<Tensor> eager = {net.w1.grad(), net.b1.grad(), net.w2.grad()};
    net.clear();
    Tensor loss = compiled(x);
    ASSERT_TRUE(loss.requires_grad());
    loss.backward();
    expect_close(net.w1.grad(), eager[0], tol, "w1");
    expect_close(net.b1.grad(), eager[1], tol, "b1");
    expect_close(net.w2.grad(), eager[2], tol, "w2");
  }
  EXPECT_EQ(compiled.stats().compiles, 2) << "batch 7 reuses the symbolic compile";
  EXPECT_EQ(compiled.stats().eager_calls, 0);
}

TEST(CompileAutograd, CapturedWeightsGetTheEagerGradientsOnCpu) { check_captured_weights(Device::cpu(), 1e-5); }

TEST(CompileAutograd, CapturedWeightsGetTheEagerGradientsOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  check_captured_weights(vk, 1e-4);
}

// A module argument's parameters and an input that requires grad, with two outputs and the
// gradient of only one of them flowing back.
// A memory budget of 1 saves every value the backward reads (gelu's result too) and recomputes
// nothing: the gradients are the same. A budget outside [0, 1] is refused.
TEST(CompileAutograd, AMemoryBudgetChangesWhatIsSavedButNotTheGradients) {
  check_captured_weights(Device::cpu(), 1e-5, /*memory_budget=*/1);
  auto fn = [](const Tensor& x) { return x; };
  EXPECT_THROW(compile(fn, {.memory_budget = 1.5}), Error);
}

TEST(CompileAutograd, ModuleParametersAndInputsGetGradients) {
  nn::Linear fc(6, 3, true, Device::cpu(), /*seed=*/5);
  for (Tensor* p : fc.parameters()) p->requires_grad_();
  auto fn = [](const Tensor& x, nn::Linear& m) {
    Tensor y = m(x);
    return std::vector<Tensor>{relu(y) * sum(x, {1}, true), argmax(y, 1)};
  };
  Tensor x = randn({4, 6}, Device::cpu(), 7);
  x.requires_grad_();
  std::vector<Tensor> eager_out = fn(x, fc);
  sum(eager_out[0] * eager_out[0]).backward();
  const std::vector<Tensor> eager = {x.grad(), fc.weight.grad(), fc.bias->grad()};
  for (Tensor* t : {&x, &fc.weight, fc.bias}) t->impl().grad.reset();

  auto compiled = compile(fn, {.fullgraph = true});
  std::vector<Tensor> out = compiled(x, fc);
  EXPECT_FALSE(out[1].requires_grad()) << "an integer output has no gradient";
  sum(out[0] * out[0]).backward();
  expect_close(x.grad(), eager[0], 1e-5, "x");
  expect_close(fc.weight.grad(), eager[1], 1e-5, "weight");
  expect_close(fc.bias->grad(), eager[2], 1e-5, "bias");
}

// A forward that also writes eager tensors (batch norm in training mode moves its running
// statistics) is differentiable, and its writes land once per call, as eagerly.
TEST(CompileAutograd, AForwardThatUpdatesRunningStatisticsIsDifferentiable) {
  nn::BatchNorm2d eager_bn(3, 1e-5, 0.1, Device::cpu()), compiled_bn(3, 1e-5, 0.1, Device::cpu());
  for (nn::BatchNorm2d* bn : {&eager_bn, &compiled_bn})
    for (Tensor* p : bn->parameters()) p->requires_grad_();
  auto fn = [](const Tensor& x, nn::BatchNorm2d& bn) { return sum(tanh(bn(x)) * x); };
  auto compiled = compile(fn, {.fullgraph = true});
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Tensor x = randn({4, 3, 5, 5}, Device::cpu(), uint64_t(30 + step));
    for (nn::BatchNorm2d* bn : {&eager_bn, &compiled_bn})
      for (Tensor* p : bn->parameters()) p->impl().grad.reset();
    fn(x, eager_bn).backward();
    Tensor loss = compiled(x, compiled_bn);
    ASSERT_TRUE(loss.requires_grad());
    loss.backward();
    expect_close(compiled_bn.weight.grad(), eager_bn.weight.grad(), 1e-5, "weight grad");
    expect_close(compiled_bn.bias.grad(), eager_bn.bias.grad(), 1e-5, "bias grad");
    expect_close(compiled_bn.running_mean, eager_bn.running_mean, 1e-5, "running mean");
    expect_close(compiled_bn.running_var, eager_bn.running_var, 1e-5, "running var");
  }
}

// Under NoGradGuard, or with nothing requiring grad, a compiled call records nothing.
TEST(CompileAutograd, NothingIsRecordedWithoutGrad) {
  TwoLayer net(Device::cpu());
  auto compiled = compile([&net](const Tensor& x) { return net.forward(x); }, {.fullgraph = true});
  Tensor x = randn({2, 8}, Device::cpu(), 1);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(compiled(x).requires_grad());
  }
  EXPECT_TRUE(compiled(x).requires_grad());
  for (Tensor* t : {&net.w1, &net.b1, &net.w2}) t->requires_grad_(false);
  EXPECT_FALSE(compiled(x).requires_grad());
}

// In a function that breaks the graph, the ops autograd must record run eagerly (the others are
// still recorded into lazy segments), so the gradients are the eager ones.
TEST(CompileAutograd, AGraphBreakStillDifferentiates) {
  TwoLayer net(Device::cpu());
  auto fn = [&net](const Tensor& x) {
    Tensor h = net.forward(x);
    const double scale = sum(h).item<double>() > 0 ? 2.0 : 0.5;  // a host read: a graph break
    return sum(h * scale);
  };
  Tensor x = randn({3, 8}, Device::cpu(), 4);
  fn(x).backward();
  const Tensor eager = net.w1.grad();
  net.clear();
  auto compiled = compile(fn);
  compiled(x).backward();
  expect_close(net.w1.grad(), eager, 1e-6, "w1");
  EXPECT_EQ(compiled.stats().graph_breaks, 1);
}

}  // namespace
}  // namespace kiln
