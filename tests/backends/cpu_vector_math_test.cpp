// The cpu device's eager transcendentals (backends/cpu/vector_math.h: libmvec's vector functions)
// against the ref device's scalar libm, on values that cross every branch of those functions
// (tiny, large, negative, zero, infinities, NaN) and on sizes that leave vector tails.
// Tolerance: |cpu - ref| <= tol * (1 + |ref|), tol 2e-6 for f32 (libmvec is within 4 ulp; the
// activations compose two functions) and 1e-13 for f64; NaN and infinities must match exactly.
// Softmax sums its row in f32 (the reference in f64): tol 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln {
namespace {

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
};

std::vector<UnaryCase> unary_cases() {
  return {{"exp", [](const Tensor& x) { return exp(x); }},
          {"log", [](const Tensor& x) { return log(x); }},
          {"sin", [](const Tensor& x) { return sin(x); }},
          {"cos", [](const Tensor& x) { return cos(x); }},
          {"tanh", [](const Tensor& x) { return tanh(x); }},
          {"erf", [](const Tensor& x) { return erf(x); }},
          {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
          {"silu", [](const Tensor& x) { return silu(x); }},
          {"elu", [](const Tensor& x) { return elu(x, 0.7); }},
          {"gelu", [](const Tensor& x) { return gelu(x); }},
          {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }}};
}

// `n` values: the special ones first, then a sweep over [-12, 12) and some larger magnitudes.
std::vector<double> inputs(int64_t n) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0.0, -0.0, 1e-30, -1e-30, 1e-7, 0.5, -0.5, 1.0, -1.0, 88.0, -88.0, 100.0,
                           -100.0, 1e4, -1e4, inf, -inf, std::numeric_limits<double>::quiet_NaN()};
  for (int64_t i = int64_t(v.size()); i < n; ++i)
    v.push_back(i % 7 == 0 ? (double(i % 301) - 150.0) * 0.9 : (double(i % 2400) - 1200.0) / 100.0);
  v.resize(size_t(n));
  return v;
}

::testing::AssertionResult matches(const std::vector<double>& actual, const std::vector<double>& expected,
                                   double tol) {
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool same_special = (std::isnan(a) && std::isnan(e)) || (std::isinf(e) && a == e);
    if (same_special) continue;
    if (std::isnan(a) || std::isnan(e) || std::isinf(a) || std::isinf(e) ||
        !(std::abs(a - e) <= tol * (1 + std::abs(e))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs " << e;
  }
  return ::testing::AssertionSuccess();
}

template <class T>
void check_against_ref(DType dtype, double tol) {
  for (int64_t n : {int64_t(18), int64_t(1000), int64_t(100003)}) {  // tails of 16, 8 and 4 lanes
    std::vector<T> values;
    for (double v : inputs(n)) values.push_back(T(v));
    for (const UnaryCase& c : unary_cases()) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      Tensor on_cpu = c.fn(from_vector(values, Device::cpu()));
      Tensor on_ref = c.fn(from_vector(values, Device::ref()));
      ASSERT_EQ(on_cpu.dtype(), dtype);
      EXPECT_TRUE(matches(on_cpu.to_vector<double>(), on_ref.to_vector<double>(), tol));
    }
  }
}

TEST(CpuVectorMath, FloatTranscendentalsMatchTheReference) { check_against_ref<float>(DType::F32, 2e-6); }

TEST(CpuVectorMath, DoubleTranscendentalsMatchTheReference) { check_against_ref<double>(DType::F64, 1e-13); }

TEST(CpuVectorMath, SoftmaxOverTheLastDimMatchesTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{7, 17}, {3, 1000}, {2, 3, 33}, {5}}) {
    const int64_t n = shape.back();
    std::vector<float> values;
    for (double v : inputs(numel(shape))) values.push_back(std::isinf(v) || std::isnan(v) ? 0.5f : float(v));
    if (shape.size() == 2) {  // row 0 holds a NaN; row 1 an infinity and a minus infinity
      values[3] = nan;
      values[size_t(n) + 1] = inf;
      values[size_t(n) + 2] = -inf;
    }
    for (const bool log_form : {false, true}) {
      SCOPED_TRACE(std::string(log_form ? "log_softmax " : "softmax ") + std::to_string(shape.size()) + "-d n=" +
                   std::to_string(n));
      auto fn = [&](const Tensor& x) { return log_form ? log_softmax(x, -1) : softmax(x, -1); };
      Tensor on_cpu = fn(from_vector(values, shape, Device::cpu()));
      Tensor on_ref = fn(from_vector(values, shape, Device::ref()));
      EXPECT_TRUE(matches(on_cpu.to_vector<double>(), on_ref.to_vector<double>(), 1e-5));
    }
  }
}

TEST(CpuVectorMath, SoftmaxOverAnInnerDimKeepsItsValues) {
  std::vector<float> values;
  for (double v : inputs(4 * 9 * 5)) values.push_back(std::isinf(v) || std::isnan(v) ? 0.5f : float(v));
  Tensor on_cpu = softmax(from_vector(values, {4, 9, 5}, Device::cpu()), 1);
  Tensor on_ref = softmax(from_vector(values, {4, 9, 5}, Device::ref()), 1);
  EXPECT_TRUE(matches(on_cpu.to_vector<double>(), on_ref.to_vector<double>(), 1e-6));
}

}  // namespace
}  // namespace kiln
