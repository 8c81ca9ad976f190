// The losses: values against the formulas evaluated here in plain double arithmetic, torch's
// reductions (mean over counted targets with ignore_index), gradients against central differences
// in f64, and bad calls.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <kiln/kiln.h>

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

const std::vector<double> kLogits = {1.0, -0.5, 2.0, 0.3, 0.0, -1.2, 0.7, 0.7, -2.0, 1.5, 0.2, -0.1};  // [4, 3]
const std::vector<int64_t> kClasses = {2, 0, 1, 1};

// -log softmax(row)[c], by hand.
double nll_by_hand(const std::vector<double>& row, int64_t c, double smoothing = 0) {
  double m = std::max({row[0], row[1], row[2]}), z = 0;
  for (double v : row) z += std::exp(v - m);
  auto logp = [&](size_t k) { return row[k] - m - std::log(z); };
  double uniform = -(logp(0) + logp(1) + logp(2)) / 3;
  return (1 - smoothing) * -logp(size_t(c)) + smoothing * uniform;
}

std::vector<double> row(size_t n) { return {kLogits[3 * n], kLogits[3 * n + 1], kLogits[3 * n + 2]}; }

TEST(Losses, CrossEntropyWithClassIndicesMatchesTheFormula) {
  Tensor logits = from_vector(kLogits, {4, 3});
  Tensor target = from_vector(kClasses, {4});
  double want = 0;
  for (size_t n = 0; n < 4; ++n) want += nll_by_hand(row(n), kClasses[n]);
  EXPECT_NEAR(values(cross_entropy(logits, target))[0], want / 4, 1e-12);
  EXPECT_NEAR(values(cross_entropy(logits, target, {.reduction = Reduction::Sum}))[0], want, 1e-12);
  std::vector<double> none = values(cross_entropy(logits, target, {.reduction = Reduction::None}));
  ASSERT_EQ(none.size(), 4u);
  EXPECT_NEAR(none[2], nll_by_hand(row(2), 1), 1e-12);
  // nll_loss of log_softmax is the same thing.
  EXPECT_NEAR(values(nll_loss(log_softmax(logits, 1), target))[0], want / 4, 1e-12);
}

TEST(Losses, CrossEntropyIgnoreIndexAndLabelSmoothingAreTorchs) {
  Tensor logits = from_vector(kLogits, {4, 3});
  Tensor target = from_vector(std::vector<int64_t>{2, -100, 1, 1}, {4});
  // Mean over the three counted rows only.
  double want = (nll_by_hand(row(0), 2) + nll_by_hand(row(2), 1) + nll_by_hand(row(3), 1)) / 3;
  EXPECT_NEAR(values(cross_entropy(logits, target))[0], want, 1e-12);
  double smoothed = (nll_by_hand(row(0), 2, 0.1) + nll_by_hand(row(2), 1, 0.1) + nll_by_hand(row(3), 1, 0.1)) / 3;
  EXPECT_NEAR(values(cross_entropy(logits, target, {.label_smoothing = 0.1}))[0], smoothed, 1e-12);
}

TEST(Losses, CrossEntropyWithProbabilitiesAndSpatialDims) {
  // Class probabilities: -sum p log softmax.
  Tensor logits = from_vector(kLogits, {4, 3});
  std::vector<double> p = {0.2, 0.3, 0.5, 1, 0, 0, 0, 1, 0, 0.5, 0.5, 0};
  double want = 0;
  for (size_t n = 0; n < 4; ++n)
    for (size_t k = 0; k < 3; ++k)
      if (p[3 * n + k] > 0) want += p[3 * n + k] * nll_by_hand(row(n), int64_t(k));
  EXPECT_NEAR(values(cross_entropy(logits, from_vector(p, {4, 3})))[0], want / 4, 1e-12);
  // [N, C, d]: the class dim is 1, as in torch (here N=2, C=3, d=2 from the same numbers).
  Tensor spatial = permute(reshape(logits, {2, 2, 3}), {0, 2, 1});
  Tensor target = from_vector(std::vector<int64_t>{2, 0, 1, 1}, {2, 2});
  double spatial_want = 0;
  for (size_t n = 0; n < 4; ++n) spatial_want += nll_by_hand(row(n), kClasses[n]);
  EXPECT_NEAR(values(cross_entropy(spatial, target))[0], spatial_want / 4, 1e-12);
}

TEST(Losses, RegressionLossesMatchTheFormulas) {
  std::vector<double> x = {0.5, -1.0, 2.0, 0.1}, y = {0.0, 1.0, 1.5, 0.1};
  Tensor a = from_vector(x, {2, 2}), b = from_vector(y, {2, 2});
  double mse = 0, l1 = 0, smooth = 0, bce = 0;
  for (size_t i = 0; i < 4; ++i) {
    double d = x[i] - y[i];
    mse += d * d;
    l1 += std::abs(d);
    smooth += std::abs(d) < 0.5 ? 0.5 * d * d / 0.5 : std::abs(d) - 0.25;
    double t = std::clamp(y[i], 0.0, 1.0), s = 1 / (1 + std::exp(-x[i]));
    bce += -(t * std::log(s) + (1 - t) * std::log(1 - s));
  }
  EXPECT_NEAR(values(mse_loss(a, b))[0], mse / 4, 1e-12);
  EXPECT_NEAR(values(l1_loss(a, b, {.reduction = Reduction::Sum}))[0], l1, 1e-12);
  EXPECT_NEAR(values(smooth_l1_loss(a, b, {.beta = 0.5}))[0], smooth / 4, 1e-12);
  Tensor t = clamp(b, 0.0, 1.0);
  EXPECT_NEAR(values(binary_cross_entropy_with_logits(a, t))[0], bce / 4, 1e-12);
}

// d loss / d input against central differences, for each loss.
void expect_gradient_matches(const std::function<Tensor(const Tensor&)>& loss_of, std::vector<double> x,
                             const Dims& shape) {
  Tensor input = from_vector(x, shape);
  input.requires_grad_();
  loss_of(input).backward();
  std::vector<double> analytic = values(input.grad());
  NoGradGuard no_grad;
  for (size_t i = 0; i < x.size(); ++i) {
    auto at = [&](double d) {
      std::vector<double> v = x;
      v[i] += d;
      return values(loss_of(from_vector(v, shape)))[0];
    };
    double numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
    EXPECT_NEAR(analytic[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << "element " << i;
  }
}

TEST(Losses, GradientsMatchCentralDifferences) {
  Tensor target = from_vector(std::vector<int64_t>{2, -100, 1, 1}, {4});
  Tensor y = from_vector(std::vector<double>{0.0, 1.0, 1.4, 0.3}, {2, 2});
  Tensor t = from_vector(std::vector<double>{0.0, 1.0, 0.6, 0.3}, {2, 2});
  std::vector<double> x = {0.5, -1.0, 2.0, 0.1};
  SCOPED_TRACE("cross_entropy");
  expect_gradient_matches([&](const Tensor& l) { return cross_entropy(l, target, {.label_smoothing = 0.2}); }, kLogits, {4, 3});
  expect_gradient_matches([&](const Tensor& v) { return mse_loss(v, y); }, x, {2, 2});
  expect_gradient_matches([&](const Tensor& v) { return l1_loss(v, y); }, x, {2, 2});
  expect_gradient_matches([&](const Tensor& v) { return smooth_l1_loss(v, y, {.beta = 0.5}); }, x, {2, 2});
  expect_gradient_matches([&](const Tensor& v) { return binary_cross_entropy_with_logits(v, t); }, x, {2, 2});
}

TEST(Losses, BadTargetsAreErrorsNamingTheCall) {
  Tensor logits = from_vector(kLogits, {4, 3});
  try {
    cross_entropy(logits, from_vector(std::vector<int64_t>{1, 2}, {2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("losses_test.cpp:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the target must be [4] class indices"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mse_loss(logits, from_vector(kLogits, {3, 4})), Error);
  EXPECT_THROW(cross_entropy(logits, from_vector(kClasses, {4}), {.label_smoothing = 1.5}), Error);
}

}  // namespace
}  // namespace kiln
