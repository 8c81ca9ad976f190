// Norm ops on the cpu reference backend against hand-derived values and naive formulas.
#include <cmath>

#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::Dims64;
using testing::expect_error;
using testing::product;

using testing::all_close;
using testing::uniform_values;
using testing::values;

int64_t count(const Dims64& dims, size_t begin = 0, size_t end = size_t(-1)) {
  int64_t n = 1;
  for (size_t i = begin; i < std::min(end, dims.size()); ++i) n *= dims[i];
  return n;
}

// Input values after a round trip through dtype, so the oracle sees what the kernel sees.
std::vector<double> stored(const std::vector<float>& v, const Dims64& dims, DType dt) {
  return values(from_vector(v, dims).to(dt));
}

// Expects a kiln::Error mentioning every piece of `parts`.
// (x - mean) / sqrt(biased var + eps) * w + b over consecutive blocks of `block` elements, with
// w/b indexed by param_of(position in the block).
std::vector<double> naive_normalize(const std::vector<double>& x, int64_t block, double eps,
                                    const std::vector<double>& w, const std::vector<double>& b,
                                    int64_t (*param_of)(int64_t, int64_t), int64_t arg) {
  std::vector<double> out(x.size());
  for (size_t start = 0; start < x.size(); start += size_t(block)) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < block; ++i) mean += x[start + size_t(i)];
    mean /= double(block);
    for (int64_t i = 0; i < block; ++i) var += std::pow(x[start + size_t(i)] - mean, 2);
    var /= double(block);
    int64_t block_index = int64_t(start) / block;
    for (int64_t i = 0; i < block; ++i) {
      size_t p = size_t(param_of(block_index * block + i, arg));
      out[start + size_t(i)] = (x[start + size_t(i)] - mean) / std::sqrt(var + eps) * w[p] + b[p];
    }
  }
  return out;
}

TEST(LayerNorm, HandValuesOverLastDim) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 6, 8}, {2, 3});
  // Row 0: mean 2, var 2/3; row 1: mean 6, var 8/3.
  double r0 = 1 / std::sqrt(2.0 / 3 + 1e-5), r1 = 1 / std::sqrt(8.0 / 3 + 1e-5);
  EXPECT_TRUE(all_close(values(layer_norm(x, {3})), {-r0, 0, r0, -2 * r1, 0, 2 * r1}));
  Tensor w = from_vector<float>({1, 2, 3}, {3}), b = from_vector<float>({0, 1, 0}, {3});
  EXPECT_TRUE(all_close(values(layer_norm(x, {3}, w, b)), {-r0, 1, 3 * r0, -2 * r1, 1, 6 * r1}));
  // A bias without a weight means a weight of ones.
  EXPECT_TRUE(all_close(values(layer_norm(x, {3}, Tensor(), b)), {-r0, 1, r0, -2 * r1, 1, 2 * r1}));
}

TEST(LayerNorm, RandomMatchesNaiveFormulaForEachNormalizedShape) {
  Dims64 dims = {2, 3, 4, 5};
  std::vector<float> raw = uniform_values(size_t(count(dims)), 21, -3, 5);
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor x = from_vector(raw, dims).to(dt);
    std::vector<double> in = stored(raw, dims, dt);
    double tol = dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : dt == DType::F32 ? 1e-5 : 1e-12;
    for (size_t axis = 1; axis < dims.size(); ++axis) {
      Dims64 shape(dims.begin() + axis, dims.end());
      int64_t n = count(shape);
      std::vector<float> wraw = uniform_values(size_t(n), 22, 0.5, 1.5);
      std::vector<float> braw = uniform_values(size_t(n), 23, -1, 1);
      // Parameters stay f32 while x varies: mixed precision is allowed.
      Tensor w = from_vector(wraw, shape), b = from_vector(braw, shape);
      auto same = [](int64_t i, int64_t n) { return i % n; };
      std::vector<double> expected = naive_normalize(in, n, 1e-3, std::vector<double>(wraw.begin(), wraw.end()),
                                                     std::vector<double>(braw.begin(), braw.end()), same, n);
      Tensor y = layer_norm(x, shape, w, b, 1e-3);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.sizes(), dims);
      EXPECT_TRUE(all_close(values(y), expected, tol, tol)) << dtype_name(dt) << " axis " << axis;
    }
  }
}

TEST(LayerNorm, ErrorsNameShapes) {
  Tensor x = zeros({2, 3});
  expect_error([&] { layer_norm(x, {2}); }, {"layer_norm", "[2]", "f32[2,3]", "trailing"});
  expect_error([&] { layer_norm(x, {}); }, {"layer_norm", "f32[2,3]", "non-empty"});
  expect_error([&] { layer_norm(x, {1, 2, 3}); }, {"layer_norm", "f32[2,3]"});
  expect_error([&] { layer_norm(x, {3}, zeros({4})); },
               {"'layer_norm'", "f32[2,3]", "f32[4]", "weight has shape [4], expected [3]"});
  expect_error([&] { layer_norm(x, {3}, zeros({3}), zeros({2})); },
               {"'layer_norm'", "f32[2,3]", "bias has shape [2]"});
  expect_error([&] { layer_norm(zeros({2, 3}, DType::I32), {3}); },
               {"'layer_norm'", "i32[2,3]", "floating"});
}

TEST(BatchNorm, MatchesNaiveFormulaFor2dAnd4dInputs) {
  std::vector<float> mean_raw = {0.5f, -1, 2}, var_raw = {1, 0.25f, 4};
  std::vector<float> w_raw = {2, 0.5f, -1}, b_raw = {0, 1, -2};
  Tensor mean = from_vector(mean_raw, {3}), var = from_vector(var_raw, {3});
  Tensor w = from_vector(w_raw, {3}), b = from_vector(b_raw, {3});
  for (const Dims64& dims : {Dims64{2, 3, 4, 5}, Dims64{4, 3}, Dims64{2, 3, 7}}) {
    int64_t spatial = count(dims, 2);
    std::vector<float> raw = uniform_values(size_t(count(dims)), 31, -3, 3);
    for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      Tensor x = from_vector(raw, dims).to(dt);
      std::vector<double> in = stored(raw, dims, dt);
      double tol = dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : dt == DType::F32 ? 1e-5 : 1e-12;
      auto expect = [&](bool affine, bool bias_only) {
        std::vector<double> out(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          size_t c = size_t(int64_t(i) / spatial % 3);
          double y = (in[i] - mean_raw[c]) / std::sqrt(var_raw[c] + 1e-5);
          if (affine) y = y * w_raw[c] + b_raw[c];
          if (bias_only) y += b_raw[c];
          out[i] = y;
        }
        return out;
      };
      EXPECT_TRUE(all_close(values(batch_norm(x, mean, var, w, b)), expect(true, false), tol, tol))
          << dtype_name(dt);
      EXPECT_TRUE(all_close(values(batch_norm(x, mean, var)), expect(false, false), tol, tol));
      EXPECT_TRUE(all_close(values(batch_norm(x, mean, var, Tensor(), b)), expect(false, true), tol, tol));
      EXPECT_EQ(batch_norm(x, mean, var).dtype(), dt);
    }
  }
}

TEST(BatchNorm, ErrorsNameShapes) {
  Tensor x = zeros({2, 3, 4}), c3 = ones({3});
  expect_error([&] { batch_norm(x, zeros({4}), c3); },
               {"'batch_norm'", "f32[2,3,4]", "running_mean has shape [4], expected [3]"});
  expect_error([&] { batch_norm(x, c3, c3, zeros({2})); }, {"'batch_norm'", "weight"});
  expect_error([&] { batch_norm(zeros({3}), c3, c3); }, {"'batch_norm'", "f32[3]", "rank >= 2"});
}

TEST(GroupNorm, MatchesNaiveFormulaForEachGroupCount) {
  Dims64 dims = {2, 6, 3, 4};
  const int64_t spatial = 12;
  std::vector<float> raw = uniform_values(size_t(count(dims)), 41, -2, 6);
  std::vector<float> w_raw = uniform_values(6, 42, 0.5, 1.5), b_raw = uniform_values(6, 43, -1, 1);
  Tensor w = from_vector(w_raw, {6}), b = from_vector(b_raw, {6});
  std::vector<double> wd(w_raw.begin(), w_raw.end()), bd(b_raw.begin(), b_raw.end());
  std::vector<double> ones6(6, 1.0), zeros6(6, 0.0);
  auto channel = [](int64_t i, int64_t spatial) { return i / spatial % 6; };
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor x = from_vector(raw, dims).to(dt);
    std::vector<double> in = stored(raw, dims, dt);
    double tol = dt == DType::BF16 ? 2e-2 : dt == DType::F16 ? 4e-3 : dt == DType::F32 ? 1e-5 : 1e-12;
    for (int64_t groups : {1, 2, 3, 6}) {
      int64_t block = 6 / groups * spatial;
      EXPECT_TRUE(all_close(values(group_norm(x, groups, w, b)),
                            naive_normalize(in, block, 1e-5, wd, bd, channel, spatial), tol, tol))
          << dtype_name(dt) << " groups " << groups;
      EXPECT_TRUE(all_close(values(group_norm(x, groups)),
                            naive_normalize(in, block, 1e-5, ones6, zeros6, channel, spatial), tol, tol));
      EXPECT_TRUE(all_close(values(group_norm(x, groups, Tensor(), b)),
                            naive_normalize(in, block, 1e-5, ones6, bd, channel, spatial), tol, tol));
    }
  }
}

TEST(GroupNorm, ErrorsNameShapes) {
  Tensor x = zeros({2, 6, 4});
  expect_error([&] { group_norm(x, 4); }, {"'group_norm'", "f32[2,6,4]", "num_groups 4", "divide"});
  expect_error([&] { group_norm(x, 0); }, {"'group_norm'", "positive"});
  expect_error([&] { group_norm(x, 2, zeros({3})); },
               {"'group_norm'", "f32[3]", "weight has shape [3], expected [6]"});
  expect_error([&] { group_norm(zeros({6}), 2); }, {"'group_norm'", "f32[6]", "rank >= 2"});
  // A bias alone of the wrong size is reported as the bias, not as the filled-in weight.
  expect_error([&] { group_norm(x, 2, Tensor(), zeros({4})); }, {"'group_norm'", "bias has shape [4]"});
}

}  // namespace
}  // namespace kiln
