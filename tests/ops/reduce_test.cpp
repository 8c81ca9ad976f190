// Reduce ops on the cpu reference backend against hand-derived values and naive loops.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::Dims64;
using testing::expect_error;
using testing::product;

using testing::all_close;
using testing::as_doubles;
using testing::uniform_values;
using testing::values;

using ReduceFn = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool, Loc);

// The input values each output position reduces, in increasing input order, plus the output shape.
struct Groups {
  std::vector<std::vector<double>> values;
  Dims64 shape;
};

Groups naive_groups(const std::vector<double>& in, const Dims64& dims, Dims64 reduce, bool keepdim) {
  const size_t rank = dims.size();
  std::vector<bool> mask(rank, reduce.empty());
  for (int64_t d : reduce) mask[size_t(d < 0 ? d + int64_t(rank) : d)] = true;
  Groups g;
  Dims64 kept;
  for (size_t i = 0; i < rank; ++i) {
    if (!mask[i]) kept.push_back(dims[i]);
    if (!mask[i] || keepdim) g.shape.push_back(mask[i] ? 1 : dims[i]);
  }
  int64_t n_out = 1;
  for (int64_t d : kept) n_out *= d;
  g.values.resize(size_t(n_out));
  for (size_t lin = 0; lin < in.size(); ++lin) {
    // Coordinates of lin, then the row-major index over the kept coordinates.
    Dims64 coord(rank);
    int64_t rem = int64_t(lin);
    for (size_t k = rank; k-- > 0;) {
      coord[k] = rem % dims[k];
      rem /= dims[k];
    }
    int64_t out = 0;
    for (size_t k = 0; k < rank; ++k)
      if (!mask[k]) out = out * dims[k] + coord[k];
    g.values[size_t(out)].push_back(in[lin]);
  }
  return g;
}

std::vector<double> fold(const Groups& g, const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (const auto& v : g.values) out.push_back(f(v));
  return out;
}

double naive_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double naive_prod(const std::vector<double>& v) {
  double p = 1;
  for (double x : v) p *= x;
  return p;
}
double naive_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double naive_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double naive_mean(const std::vector<double>& v) { return naive_sum(v) / double(v.size()); }
double naive_logsumexp(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::exp(x);
  return std::log(s);
}
double naive_argmax(const std::vector<double>& v) {
  return double(std::max_element(v.begin(), v.end()) - v.begin());  // first maximum
}
double naive_argmin(const std::vector<double>& v) {
  return double(std::min_element(v.begin(), v.end()) - v.begin());
}

// Input values after a round trip through dtype, so the oracle sees what the kernel sees.
std::vector<double> stored(const std::vector<float>& v, const Dims64& dims, DType dt) {
  return values(from_vector(v, dims).to(dt));
}

// Expects a kiln::Error mentioning every piece of `parts`.
TEST(Reduce, SumHandValuesOverEachDim) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(all_close(values(sum(x, {0})), {5, 7, 9}));
  EXPECT_TRUE(all_close(values(sum(x, {1})), {6, 15}));
  EXPECT_TRUE(all_close(values(sum(x, {-1})), {6, 15}));
  EXPECT_TRUE(all_close(values(sum(x, {0, 1})), {21}));
  EXPECT_TRUE(all_close(values(sum(x)), {21}));
  EXPECT_EQ(sum(x).sizes(), Dims64{});
  EXPECT_EQ(sum(x, {0}).sizes(), Dims64{3});
  EXPECT_EQ(sum(x, {1}, true).sizes(), (Dims64{2, 1}));
  EXPECT_EQ(sum(x, {}, true).sizes(), (Dims64{1, 1}));
}

TEST(Reduce, MeanProdMaxMinHandValues) {
  Tensor x = from_vector<float>({1, -2, 3, 4, 5, -6}, {2, 3});
  EXPECT_TRUE(all_close(values(mean(x, {0})), {2.5, 1.5, -1.5}));
  EXPECT_TRUE(all_close(values(mean(x)), {5.0 / 6}));
  EXPECT_TRUE(all_close(values(prod(x, {1})), {-6, -120}));
  EXPECT_TRUE(all_close(values(amax(x, {1})), {3, 5}));
  EXPECT_TRUE(all_close(values(max(x, {0})), {4, 5, 3}));
  EXPECT_TRUE(all_close(values(amin(x)), {-6}));
  EXPECT_TRUE(all_close(values(min(x, {0}, true)), {1, -2, -6}));
  EXPECT_EQ(min(x, {0}, true).sizes(), (Dims64{1, 3}));
}

TEST(Reduce, KeepdimShapesFor3dInput) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_EQ(sum(x, {0, 2}, true).sizes(), (Dims64{1, 3, 1}));
  EXPECT_EQ(sum(x, {0, 2}).sizes(), (Dims64{3}));
  EXPECT_EQ(mean(x, {}, true).sizes(), (Dims64{1, 1, 1}));
  EXPECT_EQ(amax(x, {-2}).sizes(), (Dims64{2, 4}));
  EXPECT_EQ(argmax(x, 1, true).sizes(), (Dims64{2, 1, 4}));
  EXPECT_EQ(argmax(x, -1).sizes(), (Dims64{2, 3}));
}

struct FloatCase {
  const char* name;
  ReduceFn op;
  double (*ref)(const std::vector<double>&);
};

const FloatCase kFloatCases[] = {
    {"sum", sum, naive_sum},   {"mean", mean, naive_mean},
    {"prod", prod, naive_prod}, {"amax", amax, naive_max},
    {"amin", amin, naive_min}, {"logsumexp", logsumexp, naive_logsumexp},
};

// Runs every float reduction over each dim set of `dims` against the naive grouping.
void check_float_reductions(const Dims64& dims, const std::vector<Dims64>& dim_sets, DType dt,
                            double tol) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  // Values in [0.6, 1.4) keep prod of ~100 elements finite and meaningful.
  std::vector<float> raw = uniform_values(size_t(n), uint64_t(n) + dims.size(), 0.6f, 1.4f);
  Tensor x = from_vector(raw, dims).to(dt);
  std::vector<double> in = stored(raw, dims, dt);
  for (const FloatCase& c : kFloatCases)
    for (const Dims64& set : dim_sets)
      for (bool keepdim : {false, true}) {
        Tensor y = c.op(x, set, keepdim, Loc::current());
        Groups g = naive_groups(in, dims, set, keepdim);
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_EQ(y.sizes(), g.shape) << c.name;
        EXPECT_TRUE(all_close(values(y), fold(g, c.ref), tol, tol))
            << c.name << " " << dtype_name(dt) << " dims " << shape_str(make_shape(set))
            << " keepdim " << keepdim;
      }
}

const std::vector<Dims64> k3dSets = {{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1}, {-1, 0}, {}};
const std::vector<Dims64> k4dSets = {{1, 3}, {0, 2}, {2, 3}, {0, 1, 2, 3}, {1, 2}, {3}, {0}};

TEST(Reduce, RandomF32And64MatchNaiveLoopOn3dAnd4d) {
  for (DType dt : {DType::F32, DType::F64}) {
    double tol = dt == DType::F32 ? 1e-5 : 1e-12;
    check_float_reductions({3, 4, 5}, k3dSets, dt, tol);
    check_float_reductions({2, 3, 4, 5}, k4dSets, dt, tol);
    // Kept inner dims wider than one tile of 64 and size-1 dims in the mix.
    check_float_reductions({7, 1, 130}, {{0}, {1}, {0, 1}, {2}}, dt, tol);
  }
}

TEST(Reduce, HalfAndBFloat16WithinLooseTolerance) {
  // The kernel accumulates in double, so the only error is rounding the result: f16 keeps 11
  // significant bits (rel 5e-4), bf16 8 bits (rel 4e-3).
  check_float_reductions({3, 4, 5}, k3dSets, DType::F16, 2e-3);
  check_float_reductions({2, 3, 4, 5}, k4dSets, DType::BF16, 1e-2);
}

TEST(Reduce, IntegerSumProdMaxMinAreExact) {
  Dims64 dims = {3, 4, 5};
  std::vector<float> raw = uniform_values(60, 7, -50, 50);
  for (float& v : raw) v = std::trunc(v);
  for (DType dt : {DType::I32, DType::I64}) {
    Tensor x = from_vector(raw, dims).to(dt);
    std::vector<double> in = stored(raw, dims, dt);
    for (const Dims64& set : k3dSets) {
      Groups g = naive_groups(in, dims, set, false);
      EXPECT_EQ(sum(x, set).dtype(), dt);
      EXPECT_EQ(values(sum(x, set)), fold(g, naive_sum));
      EXPECT_EQ(values(amax(x, set)), fold(g, naive_max));
      EXPECT_EQ(values(amin(x, set)), fold(g, naive_min));
    }
    // Products of up to 4 values below 50 fit in i32.
    Groups g = naive_groups(in, dims, {1}, false);
    EXPECT_EQ(values(prod(x, {1})), fold(g, naive_prod)) << dtype_name(dt);
  }
  // i64 sums beyond 2^53 stay exact (no detour through double).
  const int64_t big = (int64_t(1) << 60) + 1;
  Tensor b = from_vector<int64_t>({big, 2, -1}, {3});
  EXPECT_EQ(sum(b).item<int64_t>(), big + 1);
  EXPECT_EQ(amax(b).item<int64_t>(), big);
}

TEST(Reduce, U8SumWrapsAndMaxIsExact) {
  Tensor x = from_vector<uint8_t>({200, 100, 7, 9}, {2, 2});
  EXPECT_EQ(sum(x, {0}).to_vector<uint8_t>(), (std::vector<uint8_t>{207, 109}));
  EXPECT_EQ(sum(x, {1}).to_vector<uint8_t>(), (std::vector<uint8_t>{44, 16}));  // 300 mod 256
  EXPECT_EQ(amax(x, {1}).to_vector<uint8_t>(), (std::vector<uint8_t>{200, 9}));
}

TEST(Reduce, BoolSumAndProdGiveI64MaxMinStayBool) {
  Tensor x = from_vector<bool>({true, false, true, true, true, true}, {2, 3});
  Tensor s = sum(x, {1});
  EXPECT_EQ(s.dtype(), DType::I64);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(prod(x, {1}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(amax(x, {0}).dtype(), DType::Bool);
  EXPECT_EQ(amin(x, {1}).to_vector<bool>(), (std::vector<bool>{false, true}));  // all
  EXPECT_EQ(amax(x, {1}).to_vector<bool>(), (std::vector<bool>{true, true}));   // any
}

TEST(Reduce, LongRowsAndColumnsSplitAcrossThreads) {
  // 3 x 100000 reduced along each dim: the first is one long contiguous row per output, the
  // second walks 100000 outputs a tile at a time.
  Dims64 dims = {3, 100000};
  std::vector<float> raw = uniform_values(300000, 11, -1, 1);
  Tensor x = from_vector(raw, dims);
  std::vector<double> in = as_doubles(raw);
  EXPECT_TRUE(all_close(values(sum(x, {1})), fold(naive_groups(in, dims, {1}, false), naive_sum),
                        1e-6, 1e-6));
  EXPECT_TRUE(all_close(values(sum(x, {0})), fold(naive_groups(in, dims, {0}, false), naive_sum),
                        1e-6, 1e-6));
  EXPECT_TRUE(all_close(values(amax(x, {0})), fold(naive_groups(in, dims, {0}, false), naive_max)));
}

TEST(Reduce, ZeroSizeDimGivesIdentityOrError) {
  Tensor x = zeros({2, 0, 3});
  EXPECT_EQ(sum(x, {1}).sizes(), (Dims64{2, 3}));
  EXPECT_TRUE(all_close(values(sum(x, {1})), std::vector<double>(6, 0.0)));
  EXPECT_TRUE(all_close(values(prod(x, {1})), std::vector<double>(6, 1.0)));
  EXPECT_TRUE(std::isnan(values(mean(x, {1}))[0]));  // 0 / 0, as in PyTorch
  EXPECT_EQ(values(logsumexp(x, {1}))[0], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(amax(x, {0}).sizes(), (Dims64{0, 3}));  // nothing reduced over the empty dim
  expect_error([&] { amax(x, {1}); }, {"'max'", "f32[2,0,3]", "size 0"});
  expect_error([&] { amin(x); }, {"'min'", "size 0"});
  expect_error([&] { argmax(x, 1); }, {"'argmax'", "size 0"});
}

TEST(Reduce, MaxMinPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector<float>({1, float(nan), 3, 4, 5, 6}, {2, 3});
  std::vector<double> mx = values(amax(x, {1})), mn = values(amin(x, {1}));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mn[0]));
  EXPECT_EQ(mx[1], 6);
  EXPECT_EQ(mn[1], 4);
}

TEST(LogSumExp, StableForLargeAndInfiniteInputs) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor big = from_vector<float>({1000, 1000, -1000, -1000}, {2, 2});
  EXPECT_TRUE(all_close(values(logsumexp(big, {1})), {1000 + std::log(2.0), -1000 + std::log(2.0)}));
  Tensor infs = from_vector<float>({-inf, -inf, inf, 1}, {2, 2});
  EXPECT_EQ(values(logsumexp(infs, {1})), (std::vector<double>{-inf, inf}));
  EXPECT_EQ(logsumexp(big, {0, 1}, true).sizes(), (Dims64{1, 1}));
}

TEST(ArgMax, FirstOccurrenceOnTiesAndNaNWins) {
  Tensor x = from_vector<float>({3, 7, 7, 1, 1, 5}, {2, 3});
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(argmin(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(argmin(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(argmax(x, 0).dtype(), DType::I64);
  EXPECT_EQ(argmax(x, 1, true).sizes(), (Dims64{2, 1}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = from_vector<float>({1, nan, 9, nan}, {4});
  EXPECT_EQ(argmax(n, 0).item<int64_t>(), 1);  // the first NaN, as in PyTorch
  EXPECT_EQ(argmin(n, 0).item<int64_t>(), 1);
  Tensor s = from_vector<float>({4}, Dims{});
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);  // a scalar accepts dim 0
}

TEST(ArgMax, RandomMatchesNaiveLoopForEachDimAndDType) {
  for (const Dims64& dims : {Dims64{3, 4, 5}, Dims64{2, 3, 4, 5}, Dims64{3, 70}}) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> raw = uniform_values(size_t(n), 5 + dims.size(), -20, 20);
    for (float& v : raw) v = std::trunc(v);  // integral values make ties common
    for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64}) {
      Tensor x = from_vector(raw, dims).to(dt);
      std::vector<double> in = stored(raw, dims, dt);
      for (int64_t dim = -1; dim < int64_t(dims.size()); ++dim) {
        Groups g = naive_groups(in, dims, {dim}, false);
        EXPECT_EQ(values(argmax(x, dim)), fold(g, naive_argmax)) << dtype_name(dt) << " " << dim;
        EXPECT_EQ(values(argmin(x, dim)), fold(g, naive_argmin)) << dtype_name(dt) << " " << dim;
      }
    }
  }
}

// exp(x - max) / sum over `dim`, straight from the definition.
std::vector<double> naive_softmax(const std::vector<double>& in, const Dims64& dims, size_t dim,
                                  bool log_form) {
  int64_t outer = 1, inner = 1, n = dims[dim];
  for (size_t i = 0; i < dim; ++i) outer *= dims[i];
  for (size_t i = dim + 1; i < dims.size(); ++i) inner *= dims[i];
  std::vector<double> out(in.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      auto at = [&](int64_t i) { return size_t((o * n + i) * inner + k); };
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t i = 0; i < n; ++i) m = std::max(m, in[at(i)]);
      for (int64_t i = 0; i < n; ++i) s += std::exp(in[at(i)] - m);
      for (int64_t i = 0; i < n; ++i)
        out[at(i)] = log_form ? in[at(i)] - m - std::log(s) : std::exp(in[at(i)] - m) / s;
    }
  return out;
}

TEST(Softmax, RowsSumToOneAndMatchFormula) {
  for (const Dims64& dims : {Dims64{3, 4, 5}, Dims64{2, 3, 4, 5}, Dims64{2, 100}, Dims64{100, 3}}) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> raw = uniform_values(size_t(n), 9 + dims.size(), -5, 5);
    for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
      Tensor x = from_vector(raw, dims).to(dt);
      std::vector<double> in = stored(raw, dims, dt);
      double tol = dt == DType::BF16 ? 1e-2 : dt == DType::F16 ? 2e-3 : dt == DType::F32 ? 1e-5 : 1e-12;
      for (int64_t dim = -1; dim < int64_t(dims.size()); ++dim) {
        size_t d = size_t(dim < 0 ? dim + int64_t(dims.size()) : dim);
        Tensor y = softmax(x, dim);
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_EQ(y.sizes(), dims);
        EXPECT_TRUE(all_close(values(y), naive_softmax(in, dims, d, false), tol, tol))
            << dtype_name(dt) << " dim " << dim;
        EXPECT_TRUE(all_close(values(log_softmax(x, dim)), naive_softmax(in, dims, d, true), tol, tol))
            << dtype_name(dt) << " dim " << dim;
        // Summing along dim (in f64, so the check adds no rounding of its own) gives ones.
        std::vector<double> totals = values(sum(y.to(DType::F64), {dim}));
        EXPECT_TRUE(all_close(totals, std::vector<double>(totals.size(), 1.0), 0, 4 * tol));
      }
    }
  }
}

TEST(Softmax, LargeInputsDoNotOverflow) {
  Tensor x = from_vector<float>({1000, 1001, -1000, -1001}, {2, 2});
  double e = std::exp(-1.0);
  EXPECT_TRUE(all_close(values(softmax(x, 1)), {e / (1 + e), 1 / (1 + e), 1 / (1 + e), e / (1 + e)}));
  EXPECT_TRUE(all_close(values(log_softmax(x, 1)),
                        {-1 - std::log1p(e), -std::log1p(e), -std::log1p(e), -1 - std::log1p(e)}));
}

TEST(Reduce, ErrorsNameOpShapesAndProblem) {
  Tensor x = zeros({2, 3, 4});
  expect_error([&] { sum(x, {3}); }, {"'sum'", "f32[2,3,4]", "dim 3", "out of range"});
  expect_error([&] { mean(x, {-4}); }, {"'mean'", "f32[2,3,4]", "dim -4"});
  expect_error([&] { sum(x, {1, -2}); }, {"'sum'", "f32[2,3,4]", "more than once"});
  expect_error([&] { amax(x, {0, 0}); }, {"'max'", "more than once"});
  Tensor i = zeros({2, 3}, DType::I32);
  expect_error([&] { mean(i); }, {"'mean'", "i32[2,3]", "cast"});
  expect_error([&] { logsumexp(i, {0}); }, {"'logsumexp'", "i32[2,3]", "floating"});
  expect_error([&] { softmax(i, 0); }, {"'softmax'", "i32[2,3]", "floating"});
  expect_error([&] { log_softmax(x, 3); }, {"'log_softmax'", "f32[2,3,4]", "dim 3"});
  expect_error([&] { argmax(x, 5); }, {"'argmax'", "f32[2,3,4]", "dim 5"});
  expect_error([&] { argmin(x, -4); }, {"'argmin'", "f32[2,3,4]", "dim -4"});
}

}  // namespace
}  // namespace kiln
