// kiln::nn in training: parameters require grad from registration, train()/eval() reach every
// submodule, BatchNorm2d with batch statistics (outputs, running-stat updates and gradients
// against closed forms in double precision) and Dropout's masks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::uniform_values;
using testing::values;

constexpr double kRtol = 1e-4, kAtol = 1e-5;

// A module tree two levels deep: Sequential inside a module, with a Dropout and a BatchNorm2d.
struct Tree : nn::Module {
  nn::Sequential body;
  nn::Linear head{4, 2};
  Tree() {
    body.emplace<nn::BatchNorm2d>(1);
    body.emplace<nn::Dropout>(0.5);
    register_module("body", body);
    register_module("head", head);
  }
};

// ---- parameters and modes

TEST(NnTraining, ParametersRequireGradFromRegistrationAndKeepItThroughLoadsAndMoves) {
  nn::BatchNorm2d bn(3);
  for (auto& [name, p] : bn.named_parameters()) EXPECT_TRUE(p->requires_grad()) << name;
  for (auto& [name, b] : bn.named_buffers()) EXPECT_FALSE(b->requires_grad()) << name;

  nn::Linear fc(2, 1);
  std::map<std::string, Tensor> state{{"weight", from_vector<float>({2, -1}, {1, 2})},
                                      {"bias", from_vector<float>({0.5f})}};
  fc.load_state_dict(state);
  EXPECT_TRUE(fc.weight.requires_grad());
  EXPECT_FALSE(state["weight"].requires_grad()) << "the caller's state tensor is not marked";
  fc.to(Device(BackendKind::Null, 0)).to(Device::cpu());
  EXPECT_TRUE(fc.weight.requires_grad());
  EXPECT_TRUE(fc.bias->requires_grad());
  Tensor handle = fc.weight;
  fc.to(Device::cpu());  // already there: the same tensor, so handles to it stay live
  EXPECT_EQ(handle.impl_ptr(), fc.weight.impl_ptr());

  // No marking needed: backward reaches the parameters. d/dw sum(x @ w^T + b) = sum of x's rows.
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  sum(fc(x)).backward();
  EXPECT_EQ(values(fc.weight.grad()), (std::vector<double>{4, 6}));
  EXPECT_EQ(values(fc.bias->grad()), (std::vector<double>{2}));

  // A frozen parameter stays frozen through a load.
  fc.bias->requires_grad_(false);
  fc.load_state_dict(state);
  EXPECT_FALSE(fc.bias->requires_grad());

  NoGradGuard no_grad;  // inference records nothing
  EXPECT_FALSE(fc(x).requires_grad());
}

TEST(NnTraining, TrainAndEvalReachEverySubmodule) {
  Tree tree;
  auto modes = [&] {
    return std::vector<bool>{tree.is_training(), tree.body.is_training(),
                             tree.body[0].is_training(), tree.body[1].is_training(),
                             tree.head.is_training()};
  };
  EXPECT_EQ(modes(), std::vector<bool>(5, true)) << "modules start in training mode, as in torch";
  tree.eval();
  EXPECT_EQ(modes(), std::vector<bool>(5, false));
  tree.train();
  EXPECT_EQ(modes(), std::vector<bool>(5, true));
  tree.body.train(false);  // a subtree alone
  EXPECT_EQ(modes(), (std::vector<bool>{true, false, false, false, true}));
}

// ---- BatchNorm2d in training mode

struct ChannelStats {
  std::vector<double> mean, biased_var;
};

ChannelStats channel_stats(const std::vector<float>& x, int64_t n, int64_t c, int64_t hw) {
  ChannelStats s{std::vector<double>(size_t(c), 0), std::vector<double>(size_t(c), 0)};
  const double count = double(n * hw);
  for (int64_t i = 0; i < n * c * hw; ++i) s.mean[size_t((i / hw) % c)] += x[size_t(i)] / count;
  for (int64_t i = 0; i < n * c * hw; ++i) {
    size_t ch = size_t((i / hw) % c);
    s.biased_var[ch] += (x[size_t(i)] - s.mean[ch]) * (x[size_t(i)] - s.mean[ch]) / count;
  }
  return s;
}

TEST(NnTraining, BatchNorm2dNormalizesWithBatchStatisticsAndUpdatesRunningOnes) {
  const int64_t N = 2, C = 3, H = 2, W = 3, HW = H * W, count = N * HW;
  nn::BatchNorm2d bn(C, 1e-3, /*momentum=*/0.2);
  std::vector<float> gamma{1.5f, -1, 0.5f}, beta{0.1f, 0.2f, -0.3f};
  bn.load_state_dict({{"weight", from_vector(gamma)}, {"bias", from_vector(beta)}}, false);
  std::map<std::string, Tensor> earlier = bn.state_dict();  // updates land in place
  std::vector<float> x = uniform_values(size_t(N * C * HW), 70, -3, 3);
  ChannelStats s = channel_stats(x, N, C, HW);

  Tensor y = bn(from_vector(x, {N, C, H, W}));
  std::vector<double> expected;
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = size_t((int64_t(i) / HW) % C);
    expected.push_back((x[i] - s.mean[c]) / std::sqrt(s.biased_var[c] + 1e-3) * gamma[c] + beta[c]);
  }
  EXPECT_TRUE(all_close(values(y), expected, kRtol, kAtol));

  std::vector<double> mean1, var1;  // torch: unbiased variance in the running estimate
  for (int64_t c = 0; c < C; ++c) {
    mean1.push_back(0.8 * 0 + 0.2 * s.mean[size_t(c)]);
    var1.push_back(0.8 * 1 + 0.2 * s.biased_var[size_t(c)] * count / (count - 1));
  }
  EXPECT_TRUE(all_close(values(bn.running_mean), mean1, kRtol, kAtol));
  EXPECT_TRUE(all_close(values(bn.running_var), var1, kRtol, kAtol));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  EXPECT_TRUE(all_close(values(earlier["running_mean"]), mean1, kRtol, kAtol));
  EXPECT_FALSE(bn.running_mean.requires_grad());

  bn(from_vector(x, {N, C, H, W}));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  std::vector<double> mean2;
  for (int64_t c = 0; c < C; ++c) mean2.push_back(0.8 * mean1[size_t(c)] + 0.2 * s.mean[size_t(c)]);
  EXPECT_TRUE(all_close(values(bn.running_mean), mean2, kRtol, kAtol));

  // eval mode normalizes with what training accumulated, and updates nothing.
  bn.eval();
  Tensor z = bn(from_vector(x, {N, C, H, W}));
  std::vector<double> expected_eval;
  std::vector<double> var2 = values(bn.running_var);
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = size_t((int64_t(i) / HW) % C);
    expected_eval.push_back((x[i] - mean2[c]) / std::sqrt(var2[c] + 1e-3) * gamma[c] + beta[c]);
  }
  EXPECT_TRUE(all_close(values(z), expected_eval, kRtol, kAtol));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
}

// The gradients flow through the batch mean and variance. With xhat the normalized input and
// g = dL/dy: dL/dbeta = sum g, dL/dgamma = sum g * xhat, and
// dL/dx = gamma / (m * sigma) * (m g - sum g - xhat * sum g * xhat) over each channel's m values.
TEST(NnTraining, BatchNorm2dGradientsFlowThroughBatchStatistics) {
  const int64_t N = 3, C = 2, H = 2, W = 2, HW = H * W, m = N * HW;
  const double eps = 1e-5;
  nn::BatchNorm2d bn(C, eps);
  std::vector<float> gamma{0.7f, -1.3f}, beta{0.2f, 0.4f};
  bn.load_state_dict({{"weight", from_vector(gamma)}, {"bias", from_vector(beta)}}, false);
  std::vector<float> xv = uniform_values(size_t(N * C * HW), 71), gv = uniform_values(xv.size(), 72);
  Tensor x = from_vector(xv, {N, C, H, W});
  x.requires_grad_();
  sum(bn(x) * from_vector(gv, {N, C, H, W})).backward();

  ChannelStats s = channel_stats(xv, N, C, HW);
  std::vector<double> sum_g(size_t(C), 0), sum_g_xhat(size_t(C), 0), xhat(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    size_t c = size_t((int64_t(i) / HW) % C);
    xhat[i] = (xv[i] - s.mean[c]) / std::sqrt(s.biased_var[c] + eps);
    sum_g[c] += gv[i];
    sum_g_xhat[c] += gv[i] * xhat[i];
  }
  std::vector<double> dx;
  for (size_t i = 0; i < xv.size(); ++i) {
    size_t c = size_t((int64_t(i) / HW) % C);
    double sigma = std::sqrt(s.biased_var[c] + eps);
    dx.push_back(gamma[c] / (double(m) * sigma) * (m * gv[i] - sum_g[c] - xhat[i] * sum_g_xhat[c]));
  }
  EXPECT_TRUE(all_close(values(x.grad()), dx, 1e-3, 1e-4));
  EXPECT_TRUE(all_close(values(bn.weight.grad()), sum_g_xhat, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(values(bn.bias.grad()), sum_g, 1e-4, 1e-4));
}

TEST(NnTraining, BatchNorm2dTrainingMisuseIsReported) {
  nn::BatchNorm2d bn(2);
  int line = __LINE__ + 1;
  expect_error([&] { bn(ones({1, 2, 1, 1})); },
               {"BatchNorm2d", "f32[1,2,1,1]", "more than 1 value per channel",
                "nn_training_test.cpp:" + std::to_string(line)});
  expect_error([&] { bn(ones({2, 3, 2, 2})); }, {"BatchNorm2d", "3 channels"});
}

// Compiled in training mode, the running statistics' update is one of the program's writes-back:
// each call (the cached program's included) moves them as an eager call does; eval mode compiles
// to the running-statistics form.
TEST(NnTraining, BatchNorm2dTrainingCompiledUpdatesItsStatisticsEachCall) {
  nn::BatchNorm2d eager_bn(2), compiled_bn(2);
  auto fast = compile([](const Tensor& x, nn::BatchNorm2d& m) { return m.forward(x); }, {.fullgraph = true});
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({3, 2, 2, 2}, Device::cpu(), uint64_t(5 + call));
    EXPECT_TRUE(all_close(values(fast(x, compiled_bn)), values(eager_bn(x)), kRtol, kAtol)) << "call " << call;
    EXPECT_TRUE(all_close(values(compiled_bn.running_mean), values(eager_bn.running_mean), kRtol, kAtol)) << call;
    EXPECT_TRUE(all_close(values(compiled_bn.running_var), values(eager_bn.running_var), kRtol, kAtol)) << call;
    EXPECT_EQ(values(compiled_bn.num_batches_tracked), values(eager_bn.num_batches_tracked)) << call;
  }
  EXPECT_EQ(fast.stats().compiles, 1);
  compiled_bn.eval();  // a guard: the same sizes recompile in eval mode
  eager_bn.eval();
  Tensor x = randn({3, 2, 2, 2}, Device::cpu(), 9);
  EXPECT_TRUE(all_close(values(fast(x, compiled_bn)), values(eager_bn(x)), kRtol, kAtol)) << "eval mode";
  ASSERT_EQ(fast.stats().recompile_reasons.size(), 1u);
  EXPECT_NE(fast.stats().recompile_reasons[0].find("training mode changed"), std::string::npos)
      << fast.stats().recompile_reasons[0];
}

// ---- Dropout

TEST(NnTraining, DropoutDropsAboutPAndScalesTheRestInTrainingOnly) {
  const double p = 0.3;
  nn::Dropout drop(p, /*seed=*/9);
  std::vector<float> xv = uniform_values(20000, 80, 0.5f, 2);  // no zeros in x
  Tensor x = from_vector(xv, {100, 200});
  x.requires_grad_();
  Tensor y = drop(x);
  std::vector<double> yv = values(y);
  size_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) {
      ++dropped;
    } else {
      ASSERT_NEAR(yv[i], xv[i] / (1 - p), 1e-5 * xv[i]) << i;
    }
  }
  // 20,000 Bernoulli(0.3) draws: the standard deviation of the dropped fraction is 0.0032.
  EXPECT_NEAR(double(dropped) / double(xv.size()), p, 0.015);

  // The gradient is the same mask: 1 / (1 - p) where kept, 0 where dropped.
  sum(y).backward();
  std::vector<double> g = values(x.grad());
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(g[i], yv[i] == 0 ? 0 : 1 / (1 - p), 1e-6) << i;

  // Each call draws a new mask; a Dropout with the same seed draws the same sequence.
  nn::Dropout twin(p, 9);
  NoGradGuard no_grad;
  std::vector<double> second = values(drop(x));
  EXPECT_NE(second, yv);
  EXPECT_EQ(values(twin(x)), yv);
  EXPECT_EQ(values(twin(x)), second);

  drop.eval();
  EXPECT_EQ(values(drop(x)), values(x)) << "identity in eval mode";
  nn::Dropout none(0.0);
  EXPECT_EQ(values(none(x)), values(x));
}

TEST(NnTraining, DropoutMisuseIsReportedAndCompiledDropoutDrawsNewMasks) {
  int line = __LINE__ + 1;
  expect_error([] { nn::Dropout bad(1.0); },
               {"Dropout", "[0, 1)", "1.0", "nn_training_test.cpp:" + std::to_string(line)});
  expect_error([] { nn::Dropout bad(-0.1); }, {"Dropout", "[0, 1)"});
  nn::Dropout drop(0.5);
  expect_error([&] { drop(ones({2, 2}, DType::I64)); }, {"Dropout", "i64[2,2]", "floating-point"});
  // Compiled, each call draws a new mask (compile_random_test.cpp holds them to eager calls').
  auto fast = compile([](const Tensor& x, nn::Dropout& m) { return m.forward(x); });
  const std::vector<double> first = values(fast(ones({8, 8}), drop)), second = values(fast(ones({8, 8}), drop));
  for (double v : first) EXPECT_TRUE(v == 0 || v == 2) << v;
  EXPECT_NE(first, second);
  drop.eval();
  EXPECT_EQ(values(fast(ones({2, 2}), drop)), std::vector<double>(4, 1));
}

}  // namespace
}  // namespace kiln
