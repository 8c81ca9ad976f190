// The cpu device's eager f32 layer, batch and group norms (backends/cpu/norms.h) against the ref
// device's kernels: rows and planes with tails of every vector width, with and without weight and
// bias, layer norm over one and two trailing dims, and rows whose mean is large next to their
// spread. Both compute in f64 and differ only in the order of the additions:
// |cpu - ref| <= 1e-6 * (1 + |ref|).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln {
namespace {

::testing::AssertionResult close(const std::vector<double>& actual, const std::vector<double>& expected,
                                 double tol) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <= tol * (1 + std::abs(expected[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs " << expected[i];
  return ::testing::AssertionSuccess();
}

std::vector<float> ramp(int64_t n, float scale, float shift) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(float(i * 37 % 101 - 50) * scale + shift);
  return v;
}

TEST(CpuLayerNorm, MatchesTheReferenceWithAndWithoutItsAffineParameters) {
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{3, 1}, {5, 7}, {4, 33}, {2, 1000}}) {
    const int64_t n = shape.back(), count = shape[0] * n;
    const std::vector<float> x = ramp(count, 0.07f, 0.3f), w = ramp(n, 0.02f, 1.0f), b = ramp(n, 0.01f, -0.2f);
    for (int affine = 0; affine < 3; ++affine) {  // none, weight, weight and bias
      SCOPED_TRACE("n=" + std::to_string(n) + " affine=" + std::to_string(affine));
      auto run = [&](Device d) {
        Tensor weight = affine > 0 ? from_vector(w, d) : Tensor{};
        Tensor bias = affine > 1 ? from_vector(b, d) : Tensor{};
        return layer_norm(from_vector(x, shape, d), {n}, weight, bias, 1e-5).to_vector<double>();
      };
      EXPECT_TRUE(close(run(Device::cpu()), run(Device::ref()), 1e-6));
    }
  }
}

TEST(CpuLayerNorm, NormalizesOverTwoTrailingDims) {
  const std::vector<float> x = ramp(2 * 6 * 10, 0.11f, -1.0f), w = ramp(60, 0.03f, 0.5f);
  auto run = [&](Device d) {
    return layer_norm(from_vector(x, {2, 6, 10}, d), {6, 10}, from_vector(w, {6, 10}, d)).to_vector<double>();
  };
  EXPECT_TRUE(close(run(Device::cpu()), run(Device::ref()), 1e-6));
}

TEST(CpuLayerNorm, StaysAccurateWhenTheMeanIsLargeNextToTheSpread) {
  const std::vector<float> x = ramp(4 * 256, 0.01f, 1000.0f);
  auto run = [&](Device d) { return layer_norm(from_vector(x, {4, 256}, d), {256}).to_vector<double>(); };
  EXPECT_TRUE(close(run(Device::cpu()), run(Device::ref()), 1e-6));
}

TEST(CpuBatchNorm, MatchesTheReferenceWithAndWithoutItsAffineParameters) {
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, 3}, {2, 5, 7}, {2, 3, 5, 7}, {1, 4, 33, 33}}) {
    const int64_t c = shape[1];
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const std::vector<float> x = ramp(count, 0.07f, 0.3f), mean = ramp(c, 0.05f, 0.1f), w = ramp(c, 0.02f, 1.0f),
                             b = ramp(c, 0.01f, -0.2f);
    const std::vector<float> var = ramp(c, 0.004f, 0.5f);
    for (int affine = 0; affine < 3; ++affine) {  // none, weight, weight and bias
      SCOPED_TRACE("x " + std::to_string(count) + " elements, affine=" + std::to_string(affine));
      auto run = [&](Device d) {
        Tensor weight = affine > 0 ? from_vector(w, d) : Tensor{};
        Tensor bias = affine > 1 ? from_vector(b, d) : Tensor{};
        return batch_norm(from_vector(x, shape, d), from_vector(mean, d), from_vector(var, d), weight, bias, 1e-5)
            .to_vector<double>();
      };
      EXPECT_TRUE(close(run(Device::cpu()), run(Device::ref()), 1e-6));
    }
  }
}

TEST(CpuGroupNorm, MatchesTheReferenceForEveryGroupCount) {
  const std::vector<int64_t> shape = {2, 6, 5, 7};
  const std::vector<float> x = ramp(2 * 6 * 35, 0.09f, 40.0f), w = ramp(6, 0.03f, 0.8f), b = ramp(6, 0.02f, 0.1f);
  for (int64_t groups : {1, 2, 3, 6}) {
    for (bool affine : {false, true}) {
      SCOPED_TRACE("groups=" + std::to_string(groups) + (affine ? ", affine" : ""));
      auto run = [&](Device d) {
        Tensor weight = affine ? from_vector(w, d) : Tensor{};
        Tensor bias = affine ? from_vector(b, d) : Tensor{};
        return group_norm(from_vector(x, shape, d), groups, weight, bias, 1e-5).to_vector<double>();
      };
      EXPECT_TRUE(close(run(Device::cpu()), run(Device::ref()), 1e-6));
    }
  }
}

}  // namespace
}  // namespace kiln
