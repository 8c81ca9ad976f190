// kiln::optim: each optimizer's steps against torch's documented algorithm evaluated here in plain
// double arithmetic, in-place updates seen through every handle, state_dict round trips, the
// schedules, and a small regression trained end to end with backward().
#include <gtest/gtest.h>

#include <cmath>

#include <kiln/kiln.h>

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Gradients the steps see: g_t[i] = (i + 1) * (t + 1) * 0.1 - 0.2 (varies per element and step).
std::vector<double> grad_at(int t, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = double(i + 1) * double(t + 1) * 0.1 - 0.2;
  return g;
}

void set_grad(Tensor& p, const std::vector<double>& g) {
  p.impl().grad = from_vector(g, Dims(p.sizes())).impl_ptr();
}

const std::vector<double> kStart = {0.5, -1.0, 2.0};

TEST(Optim, SgdMatchesTorchsAlgorithm) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum with dampening");
    optim::SGDOptions o{.lr = 0.1, .momentum = 0.9, .dampening = nesterov ? 0 : 0.3, .weight_decay = 0.01,
                        .nesterov = nesterov};
    Tensor p = from_vector(kStart, {3});
    optim::SGD sgd({&p}, o);
    std::vector<double> want = kStart, buf(3);
    for (int t = 0; t < 4; ++t) {
      std::vector<double> g = grad_at(t, 3);
      set_grad(p, g);
      sgd.step();
      for (size_t i = 0; i < 3; ++i) {
        double gi = g[i] + o.weight_decay * want[i];
        buf[i] = t == 0 ? gi : o.momentum * buf[i] + (1 - o.dampening) * gi;
        double d = o.nesterov ? gi + o.momentum * buf[i] : buf[i];
        want[i] -= o.lr * d;
      }
      std::vector<double> got = values(p);
      for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "step " << t << " element " << i;
    }
  }
}

TEST(Optim, AdamAndAdamWMatchTorchsAlgorithms) {
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    const double lr = 0.05, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
    Tensor p = from_vector(kStart, {3});
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled) opt = std::make_unique<optim::AdamW>(std::vector<Tensor*>{&p}, optim::AdamWOptions{lr, b1, b2, eps, wd});
    else opt = std::make_unique<optim::Adam>(std::vector<Tensor*>{&p}, optim::AdamOptions{lr, b1, b2, eps, wd});
    std::vector<double> want = kStart, m(3, 0), v(3, 0);
    for (int t = 1; t <= 4; ++t) {
      std::vector<double> g = grad_at(t, 3);
      set_grad(p, g);
      opt->step();
      for (size_t i = 0; i < 3; ++i) {
        double gi = g[i];
        if (decoupled) want[i] *= 1 - lr * wd;
        else gi += wd * want[i];
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
        want[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
      std::vector<double> got = values(p);
      for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "step " << t << " element " << i;
    }
  }
  EXPECT_EQ(optim::AdamWOptions{}.weight_decay, 1e-2);  // torch's default
}

// The update is in place: a copy of the handle taken before the step sees the new values, the
// parameter stays a leaf that requires grad, and zero_grad drops the gradient.
TEST(Optim, StepsUpdateEveryHandleInPlace) {
  nn::Linear fc(3, 2);
  std::vector<Tensor*> params = fc.parameters();
  ASSERT_EQ(params.size(), 2u);
  Tensor weight_copy = *params[0];
  std::vector<double> before = values(weight_copy);
  optim::SGD sgd(params, {.lr = 0.5});
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {1, 3});
  sum(fc(x)).backward();
  sgd.step();
  std::vector<double> after = values(weight_copy);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(after[i], before[i] - 0.5 * (i + 1), 1e-6) << i;  // dL/dW = x
  EXPECT_TRUE(params[0]->requires_grad());
  sgd.zero_grad();
  EXPECT_FALSE(params[0]->grad().defined());
}

TEST(Optim, StateDictRoundTripContinuesTheSameTrajectory) {
  Tensor a = from_vector(kStart, {3}), b = from_vector(kStart, {3});
  optim::Adam first({&a}, {.lr = 0.1});
  for (int t = 0; t < 2; ++t) {
    set_grad(a, grad_at(t, 3));
    first.step();
  }
  b = a.detach();
  optim::Adam second({&b}, {.lr = 0.7});  // lr comes back from the state
  second.load_state_dict(first.state_dict());
  EXPECT_EQ(second.lr(), 0.1);
  set_grad(a, grad_at(2, 3));
  set_grad(b, grad_at(2, 3));
  first.step();
  second.step();
  EXPECT_EQ(values(a), values(b));
  std::map<std::string, Tensor> bad = first.state_dict();
  bad["0.exp_avg"] = from_vector(std::vector<double>{1, 2}, {2});
  EXPECT_THROW(second.load_state_dict(bad), Error);
}

TEST(Optim, StepLrAndCosineAnnealingFollowTheirFormulas) {
  Tensor p = from_vector(kStart, {3});
  optim::SGD sgd({&p}, {.lr = 1.0});
  optim::StepLR step_lr(sgd, 2, 0.5);
  std::vector<double> lrs;
  for (int e = 0; e < 5; ++e) {
    step_lr.step();
    lrs.push_back(sgd.lr());
  }
  EXPECT_EQ(lrs, (std::vector<double>{1.0, 0.5, 0.5, 0.25, 0.25}));
  optim::SGD other({&p}, {.lr = 0.2});
  optim::CosineAnnealingLR cosine(other, 4, 0.0);
  for (int e = 1; e <= 4; ++e) {
    cosine.step();
    EXPECT_NEAR(other.lr(), 0.1 * (1 + std::cos(M_PI * e / 4)), 1e-15) << e;
  }
}

// y = 3x - 1 learned by a Linear(1, 1) with SGD on mse_loss through backward(): the weights land
// on the line.
TEST(Optim, SgdFitsALineThroughBackward) {
  nn::Linear fc(1, 1);
  optim::SGD sgd(fc.parameters(), {.lr = 0.1, .momentum = 0.5});
  Tensor x = from_vector(std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5}, {6, 1});
  Tensor y = x * 3.0 - 1.0;
  for (int step = 0; step < 200; ++step) {
    sgd.zero_grad();
    mse_loss(fc(x), y).backward();
    sgd.step();
  }
  EXPECT_NEAR(fc.parameters()[0]->item<float>(), 3.0f, 1e-3f);
  EXPECT_NEAR(fc.parameters()[1]->item<float>(), -1.0f, 1e-3f);
}

// The README's training loop, as written there, on seeded data: the loss goes down.
TEST(Optim, TheReadmeTrainingLoopLowersTheLoss) {
  Tensor x = randn({32, 64}, Device::cpu(), 1);
  Tensor labels = cast(floor(rand({32}, Device::cpu(), 2) * 10.0), DType::I64);
  nn::Linear fc1(64, 128), fc2(128, 10);  // parameters require grad, as in libtorch
  std::vector<Tensor*> params = fc1.parameters();
  for (Tensor* p : fc2.parameters()) params.push_back(p);
  optim::AdamW opt(params, {.lr = 1e-3});
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(fc2(gelu(fc1(x))), labels);  // labels: int64 class indices
    loss.backward();  // gradients of every leaf that requires grad, in p->grad()
    opt.step();       // updates each parameter in place: the modules see the new weights
    (step == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_LT(last, 0.1f * first) << "32 samples memorized by a 64-128-10 net in 100 AdamW steps";
}

}  // namespace
}  // namespace kiln
