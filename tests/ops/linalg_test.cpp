// Linalg ops (matmul, gemm, linear) on the cpu reference backend against hand-derived values and
// naive triple loops written here. Tolerances: f32 rtol 1e-4 (sums of up to ~300 products),
// f64 1e-10, f16/bf16 loose (inputs are rounded to 16 bits, sums compared in double).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/ir/op.h"
#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::Dims64;
using testing::expect_error;
using testing::product;

using testing::all_close;
using testing::uniform_values;
using testing::values;

// numpy matmul by definition: promote 1-d operands, broadcast batch dims by coordinates, sum.
std::vector<double> naive_matmul(const std::vector<double>& a, Dims64 ad,
                                 const std::vector<double>& b, Dims64 bd, Dims64* out_dims) {
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  Dims64 ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  while (ab.size() < rank) ab.insert(ab.begin(), 1);
  while (bb.size() < rank) bb.insert(bb.begin(), 1);
  Dims64 ob(rank);
  for (size_t i = 0; i < rank; ++i) ob[i] = std::max(ab[i], bb[i]);
  std::vector<double> out;
  for (int64_t bi = 0; bi < product(ob); ++bi) {
    int64_t rem = bi, ao = 0, bo = 0, sa = 1, sb = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t c = rem % ob[d];
      rem /= ob[d];
      ao += (ab[d] == 1 ? 0 : c) * sa;
      bo += (bb[d] == 1 ? 0 : c) * sb;
      sa *= ab[d];
      sb *= bb[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q)
          s += a[size_t(ao * m * k + i * k + q)] * b[size_t(bo * k * n + q * n + j)];
        out.push_back(s);
      }
  }
  *out_dims = ob;
  if (!a1) out_dims->push_back(m);
  if (!b1) out_dims->push_back(n);
  return out;
}

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Checks matmul(a, b) against the naive loop for the given shapes, in f32.
void expect_matmul_matches(const Dims64& ad, const Dims64& bd, uint64_t seed) {
  std::vector<float> a = uniform_values(size_t(product(ad)), seed);
  std::vector<float> b = uniform_values(size_t(product(bd)), seed + 100);
  Dims64 od;
  std::vector<double> expected = naive_matmul(doubles(a), ad, doubles(b), bd, &od);
  Tensor out = matmul(from_vector(a, ad), from_vector(b, bd));
  EXPECT_EQ(out.sizes(), od) << "shapes " << ad.size() << "-d @ " << bd.size() << "-d";
  EXPECT_TRUE(all_close(values(out), expected, 1e-4, 1e-4));
}

TEST(MatMul, HandValues2x2) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<float>({5, 6, 7, 8}, {2, 2});
  EXPECT_TRUE(all_close(values(matmul(a, b)), {19, 22, 43, 50}));
}

TEST(MatMul, OneDimOperandsArePromotedAndSqueezed) {
  Tensor v = from_vector<float>({1, 2, 3}, {3});
  Tensor m = from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor vv = matmul(v, v);
  EXPECT_EQ(vv.sizes(), Dims64{});
  EXPECT_TRUE(all_close(values(vv), {14}));
  EXPECT_EQ(matmul(v, m).sizes(), Dims64{2});
  EXPECT_TRUE(all_close(values(matmul(v, m)), {4, 5}));
  Tensor mt = from_vector<float>({1, 0, 3, 0, 1, 1}, {2, 3});
  EXPECT_EQ(matmul(mt, v).sizes(), Dims64{2});
  EXPECT_TRUE(all_close(values(matmul(mt, v)), {10, 5}));
  expect_matmul_matches({5}, {4, 5, 3}, 1);     // vector @ batch of matrices -> [4, 3]
  expect_matmul_matches({2, 3, 6, 5}, {5}, 2);  // batch of matrices @ vector -> [2, 3, 6]
}

TEST(MatMul, BatchDimsBroadcastLikeNumpy) {
  expect_matmul_matches({2, 1, 3, 4}, {3, 4, 5}, 3);
  expect_matmul_matches({3, 4, 5}, {1, 5, 2}, 4);
  expect_matmul_matches({7, 5}, {2, 2, 5, 3}, 5);
}

TEST(MatMul, BlockEdgesMatchNaiveLoop) {
  // Sizes straddle the micro-tile (6 x 8), row block (96) and K block (256) boundaries.
  expect_matmul_matches({97, 300}, {300, 71}, 6);
  expect_matmul_matches({1, 513}, {513, 9}, 7);
  expect_matmul_matches({13, 1}, {1, 17}, 8);
  expect_matmul_matches({3, 0}, {0, 4}, 9);  // empty sum: zeros
}

TEST(MatMul, FloatDTypesWithinTolerance) {
  const Dims64 ad = {2, 9, 33}, bd = {33, 10};
  std::vector<float> a = uniform_values(size_t(product(ad)), 10),
                     b = uniform_values(size_t(product(bd)), 11);
  struct Case {
    DType dtype;
    double tol;
  } cases[] = {{DType::F64, 1e-10}, {DType::F16, 2e-2}, {DType::BF16, 1.5e-1}};
  for (const Case& c : cases) {
    Tensor ta = from_vector(a, ad).to(c.dtype), tb = from_vector(b, bd).to(c.dtype);
    // Reference on the rounded inputs, so only the product's own rounding is measured.
    Dims64 od;
    std::vector<double> expected = naive_matmul(values(ta), ad, values(tb), bd, &od);
    Tensor out = matmul(ta, tb);
    EXPECT_EQ(out.dtype(), c.dtype);
    EXPECT_EQ(out.sizes(), od);
    EXPECT_TRUE(all_close(values(out), expected, c.tol, c.tol)) << dtype_name(c.dtype);
  }
}

TEST(MatMul, IntegerDTypesExact) {
  const Dims64 ad = {3, 4, 7}, bd = {7, 5};
  std::vector<int32_t> a, b;
  for (float f : uniform_values(size_t(product(ad)), 12, -20, 20)) a.push_back(int32_t(f));
  for (float f : uniform_values(size_t(product(bd)), 13, -20, 20)) b.push_back(int32_t(f));
  Dims64 od;
  std::vector<double> expected =
      naive_matmul({a.begin(), a.end()}, ad, {b.begin(), b.end()}, bd, &od);
  Tensor out = matmul(from_vector(a, ad), from_vector(b, bd));
  EXPECT_EQ(out.dtype(), DType::I32);
  EXPECT_EQ(values(out), expected);
  Tensor out64 = matmul(from_vector(a, ad).to(DType::I64), from_vector(b, bd).to(DType::I64));
  EXPECT_EQ(out64.dtype(), DType::I64);
  EXPECT_EQ(values(out64), expected);
}

TEST(MatMul, Large512IsCorrectAndReportsTime) {
  const int64_t n = 512;
  std::vector<float> a = uniform_values(size_t(n * n), 14), b = uniform_values(size_t(n * n), 15);
  Tensor ta = from_vector(a, {n, n}), tb = from_vector(b, {n, n});
  matmul(ta, tb);  // warm the thread pool and allocator
  auto start = std::chrono::steady_clock::now();
  Tensor out = matmul(ta, tb);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ info ] matmul 512x512x512 f32: %.4f s\n", seconds);
  std::vector<float> got = out.to_vector<float>();
  for (int64_t i = 0; i < n; i += 51)
    for (int64_t j = 0; j < n; j += 37) {
      double s = 0;
      for (int64_t q = 0; q < n; ++q) s += double(a[size_t(i * n + q)]) * b[size_t(q * n + j)];
      ASSERT_NEAR(got[size_t(i * n + j)], s, 1e-3 + 1e-4 * std::abs(s)) << i << "," << j;
    }
  EXPECT_LT(seconds, 2.0);  // generous: the target is ~0.15 s on 2 cores, shared machines vary
}

// Expects fn() to throw a kiln::Error whose message contains every one of `parts`.
TEST(MatMul, ErrorsNameOpAndShapes) {
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({4, 5}));
      },
      {"op 'matmul'", "f32[2,3]", "f32[4,5]", "inner dimensions", "linalg_test.cpp"});
  expect_error([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"op 'matmul'", "batch"});
  expect_error(
      [] {
        matmul(zeros({2, 3}), zeros({3, 4}, DType::F64));
      },
      {"op 'matmul'", "f32[2,3]", "f64[3,4]", "dtypes must match"});
  expect_error(
      [] {
        matmul(zeros({2, 3}, DType::Bool), zeros({3, 4}, DType::Bool));
      },
      {"op 'matmul'", "bool"});
  expect_error([] { matmul(zeros({}), zeros({3})); }, {"op 'matmul'", "rank"});
}

// alpha * op(A) @ op(B) + beta * C by definition; c_dims broadcast to [m, n].
std::vector<double> naive_gemm(const std::vector<float>& a, const std::vector<float>& b,
                               const std::vector<float>& c, const Dims64& c_dims, int64_t m,
                               int64_t n, int64_t k, bool ta, bool tb, double alpha, double beta) {
  std::vector<double> out;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q)
        s += double(a[size_t(ta ? q * m + i : i * k + q)]) * b[size_t(tb ? j * k + q : q * n + j)];
      double cv = 0;
      if (!c.empty()) {
        const int64_t rows = c_dims.size() == 2 ? c_dims[0] : 1;
        const int64_t cols = c_dims.empty() ? 1 : c_dims.back();
        cv = c[size_t((rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j))];
      }
      out.push_back(alpha * s + beta * cv);
    }
  return out;
}

TEST(Gemm, TransposesAlphaBetaAndBroadcastC) {
  const int64_t m = 7, n = 11, k = 13;
  std::vector<float> a = uniform_values(size_t(m * k), 20), b = uniform_values(size_t(k * n), 21);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const Dims64& cd : {Dims64{m, n}, Dims64{n}, Dims64{m, 1}, Dims64{}}) {
        std::vector<float> c = uniform_values(size_t(product(cd)), 22);
        Tensor out = gemm(from_vector(a, ta ? Dims64{k, m} : Dims64{m, k}),
                          from_vector(b, tb ? Dims64{n, k} : Dims64{k, n}), from_vector(c, cd), 0.5,
                          2.0, ta, tb);
        EXPECT_EQ(out.sizes(), (Dims64{m, n}));
        EXPECT_TRUE(
            all_close(values(out), naive_gemm(a, b, c, cd, m, n, k, ta, tb, 0.5, 2.0), 1e-4, 1e-4))
            << "trans_a " << ta << " trans_b " << tb << " c rank " << cd.size();
      }
}

TEST(Gemm, WithoutCAndInOtherDTypes) {
  const int64_t m = 5, n = 4, k = 6;
  std::vector<float> a = uniform_values(size_t(m * k), 23), b = uniform_values(size_t(k * n), 24);
  std::vector<double> expected = naive_gemm(a, b, {}, {}, m, n, k, false, true, 1.5, 1.0);
  Tensor out = gemm(from_vector(a, {m, k}), from_vector(b, {n, k}), {}, 1.5, 1.0, false, true);
  EXPECT_TRUE(all_close(values(out), expected, 1e-5, 1e-5));
  Tensor out64 = gemm(from_vector(a, {m, k}).to(DType::F64), from_vector(b, {n, k}).to(DType::F64),
                      {}, 1.5, 1.0, false, true);
  EXPECT_TRUE(all_close(values(out64), expected, 1e-10, 1e-10));
  Tensor out16 = gemm(from_vector(a, {m, k}).to(DType::F16), from_vector(b, {n, k}).to(DType::F16),
                      {}, 1.5, 1.0, false, true);
  EXPECT_EQ(out16.dtype(), DType::F16);
  EXPECT_TRUE(all_close(values(out16), expected, 2e-2, 2e-2));
  Tensor ai = from_vector<int32_t>({1, 2, 3, 4}, {2, 2}), ci = from_vector<int32_t>({10, 20}, {2});
  EXPECT_EQ(values(gemm(ai, ai, ci)), (std::vector<double>{17, 30, 25, 42}));
}

TEST(Gemm, ErrorsNameOpAndShapes) {
  expect_error(
      [] {
        gemm(zeros({2, 3}), zeros({4, 5}));
      },
      {"op 'gemm'", "f32[2,3]", "f32[4,5]", "inner dimensions"});
  expect_error(
      [] {
        gemm(zeros({2, 3}), zeros({3, 4}), {}, 1, 1, true, false);
      },
      {"op 'gemm'", "trans_a=true"});
  expect_error(
      [] {
        gemm(zeros({2, 3}), zeros({3, 4}), zeros({3, 4}));
      },
      {"op 'gemm'", "f32[3,4]", "does not broadcast"});
  expect_error([] { gemm(zeros({2, 2, 3}), zeros({3, 4})); }, {"op 'gemm'", "2-d"});
}

TEST(Linear, ThreeDInputWithAndWithoutBias) {
  const Dims64 xd = {2, 5, 9};
  const int64_t out_features = 4, in_features = 9;
  std::vector<float> x = uniform_values(size_t(product(xd)), 30);
  std::vector<float> w = uniform_values(size_t(out_features * in_features), 31);
  std::vector<float> bias = uniform_values(size_t(out_features), 32);
  std::vector<double> expected, expected_bias;
  for (int64_t r = 0; r < 2 * 5; ++r)
    for (int64_t o = 0; o < out_features; ++o) {
      double s = 0;
      for (int64_t q = 0; q < in_features; ++q)
        s += double(x[size_t(r * in_features + q)]) * w[size_t(o * in_features + q)];
      expected.push_back(s);
      expected_bias.push_back(s + bias[size_t(o)]);
    }
  Tensor tx = from_vector(x, xd), tw = from_vector(w, {out_features, in_features});
  Tensor out = linear(tx, tw, from_vector(bias, {out_features}));
  EXPECT_EQ(out.sizes(), (Dims64{2, 5, out_features}));
  EXPECT_TRUE(all_close(values(out), expected_bias, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(values(linear(tx, tw)), expected, 1e-5, 1e-5));
  Tensor out16 = linear(tx.to(DType::BF16), tw.to(DType::BF16),
                        from_vector(bias, {out_features}).to(DType::BF16));
  EXPECT_EQ(out16.dtype(), DType::BF16);
  EXPECT_TRUE(all_close(values(out16), expected_bias, 1e-1, 1e-1));
}

TEST(Linear, OneAndTwoRowInputsMatchNaiveLoop) {
  // One or two rows take the dot-product path instead of the packed micro-tiles.
  const int64_t in_features = 37, out_features = 19;
  std::vector<float> w = uniform_values(size_t(out_features * in_features), 33);
  std::vector<float> bias = uniform_values(size_t(out_features), 34);
  for (int64_t rows : {1, 2}) {
    std::vector<float> x = uniform_values(size_t(rows * in_features), 35);
    std::vector<double> expected;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out_features; ++o) {
        double s = bias[size_t(o)];
        for (int64_t q = 0; q < in_features; ++q)
          s += double(x[size_t(r * in_features + q)]) * w[size_t(o * in_features + q)];
        expected.push_back(s);
      }
    Tensor out =
        linear(from_vector(x, {rows, in_features}), from_vector(w, {out_features, in_features}),
               from_vector(bias, {out_features}));
    EXPECT_TRUE(all_close(values(out), expected, 1e-5, 1e-5)) << rows << " rows";
  }
  // gemm with a transposed two-row A and transposed B: strided rows are gathered first.
  const int64_t m = 2, n = 5, k = 11;
  std::vector<float> a = uniform_values(size_t(m * k), 36), b = uniform_values(size_t(k * n), 37);
  Tensor out = gemm(from_vector(a, {k, m}), from_vector(b, {n, k}), {}, 2.0, 1.0, true, true);
  EXPECT_TRUE(
      all_close(values(out), naive_gemm(a, b, {}, {}, m, n, k, true, true, 2.0, 1.0), 1e-5, 1e-5));
}

TEST(Linear, ErrorsNameOpAndShapes) {
  expect_error(
      [] {
        linear(zeros({2, 5, 9}), zeros({4, 8}));
      },
      {"op 'linear'", "f32[2,5,9]", "f32[4,8]", "features"});
  expect_error(
      [] {
        linear(zeros({2, 9}), zeros({4, 9}), zeros({5}));
      },
      {"op 'linear'", "f32[5]", "bias"});
}

TEST(MatMul, ShapeRuleKeepsSymbolicBatchDims) {
  SymInt batch = SymInt::symbol("s0", 3);
  std::vector<TensorType> out = infer_types(
      OpKind::MatMul, {{DType::F32, {batch, 4, 5}}, {DType::F32, {5, 6}}}, {}, Provenance{});
  EXPECT_EQ(out[0].str(), "f32[s0,4,6]");
}

}  // namespace
}  // namespace kiln
