// Pointwise ops on the cpu reference backend against hand-derived values and naive loops.
#include <cmath>

#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::as_doubles;
using testing::uniform_values;
using testing::values;

// Broadcasts the kernels loop over without an index walk (a scalar or a row of the output's last
// dims, on either side) and one they do not (a middle dim), against a naive loop. 3 x 7000
// elements span two of the thread pool's chunks, the second starting inside a row.
TEST(Binary, BroadcastFastPathsMatchANaiveLoop) {
  const int64_t rows = 3, cols = 7000;
  const std::vector<float> xv = uniform_values(rows * cols, 11), rv = uniform_values(cols, 12);
  const Tensor x = from_vector(xv, {rows, cols}), row = from_vector(rv, {1, cols});
  const Tensor column = from_vector<float>({0.5f, -2.0f, 3.0f}, {rows, 1});
  auto naive = [&](auto f) {
    std::vector<double> out;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out.push_back(f(double(xv[size_t(r * cols + c)]), r, c));
    return out;
  };
  EXPECT_TRUE(all_close(values(x - row), naive([&](double v, int64_t, int64_t c) { return v - rv[size_t(c)]; })));
  EXPECT_TRUE(all_close(values(row - x), naive([&](double v, int64_t, int64_t c) { return rv[size_t(c)] - v; })));
  EXPECT_TRUE(all_close(values(x * 1.5), naive([](double v, int64_t, int64_t) { return v * 1.5; })));
  EXPECT_TRUE(all_close(values(sub(from_vector<float>({2}, {1}), x)), naive([](double v, int64_t, int64_t) { return 2 - v; })));
  const std::vector<float> cv = {0.5f, -2.0f, 3.0f};
  EXPECT_TRUE(all_close(values(x * column), naive([&](double v, int64_t r, int64_t) { return v * cv[size_t(r)]; })));
  EXPECT_TRUE(all_close(values(lt(x, row)),  // bool results through the row path
                        naive([&](double v, int64_t, int64_t c) { return v < rv[size_t(c)] ? 1.0 : 0.0; })));
}

TEST(Unary, HandValues) {
  Tensor x = from_vector<float>({-2.0f, -0.5f, 0.0f, 0.5f, 2.5f}, {5});
  EXPECT_TRUE(all_close(values(relu(x)), {0, 0, 0, 0.5, 2.5}));
  EXPECT_TRUE(all_close(values(abs(x)), {2, 0.5, 0, 0.5, 2.5}));
  EXPECT_TRUE(all_close(values(neg(x)), {2, 0.5, 0, -0.5, -2.5}));
  EXPECT_TRUE(all_close(values(sign(x)), {-1, -1, 0, 1, 1}));
  EXPECT_TRUE(all_close(values(floor(x)), {-2, -1, 0, 0, 2}));
  EXPECT_TRUE(all_close(values(ceil(x)), {-2, -0, 0, 1, 3}));
  EXPECT_TRUE(all_close(values(round(x)), {-2, -0, 0, 0, 2}));  // half to even
  EXPECT_TRUE(all_close(values(leaky_relu(x, 0.1)), {-0.2, -0.05, 0, 0.5, 2.5}));
  EXPECT_TRUE(all_close(values(clip(x, -1.0, 1.0)), {-1, -0.5, 0, 0.5, 1}));
  EXPECT_TRUE(all_close(values(clip(x, std::nullopt, 0.0)), {-2, -0.5, 0, 0, 0}));
}

// maximum, minimum, clip and leaky_relu select (a branch per element mispredicted on random
// signs): NaN on either side wins, and the selects agree with std::max/min, a clamp and alpha * x
// over 40000 elements (two of the thread pool's chunks and a tail), against a scalar (a relu6's
// bounds) and elementwise.
TEST(Binary, MaximumMinimumClipAndLeakyReluSelectAndKeepNaN) {
  const float nan = std::nanf("");
  const Tensor x = from_vector<float>({nan, 1.0f, -3.0f, nan}, {4}), y = from_vector<float>({2.0f, nan, 4.0f, nan}, {4});
  const std::vector<double> larger = values(maximum(x, y)), smaller = values(minimum(x, y)), clipped = values(clip(x, 0.0, 6.0));
  for (size_t i : {0, 1, 3}) {
    EXPECT_TRUE(std::isnan(larger[i])) << i;
    EXPECT_TRUE(std::isnan(smaller[i])) << i;
  }
  EXPECT_EQ(larger[2], 4.0);
  EXPECT_EQ(smaller[2], -3.0);
  EXPECT_TRUE(std::isnan(clipped[0]) && std::isnan(clipped[3]));
  EXPECT_EQ(clipped[1], 1.0);
  EXPECT_EQ(clipped[2], 0.0);

  const int64_t n = 40000;
  const std::vector<float> a = uniform_values(n, 31, -8.0f, 8.0f), b = uniform_values(n, 32, -8.0f, 8.0f);
  const Tensor ta = from_vector(a, {n}), tb = from_vector(b, {n}), six = from_vector<float>({6.0f}, Dims{});
  const std::vector<double> max_ab = values(maximum(ta, tb)), min_a6 = values(minimum(ta, six)),
                            max_0a = values(maximum(from_vector<float>({0.0f}, Dims{}), ta)), relu6 = values(clip(ta, 0.0, 6.0)),
                            leaky = values(leaky_relu(ta, 0.1));
  for (int64_t i = 0; i < n; ++i) {
    const double u = a[size_t(i)], v = b[size_t(i)];
    ASSERT_EQ(max_ab[size_t(i)], std::max(u, v)) << i;
    ASSERT_EQ(min_a6[size_t(i)], std::min(u, 6.0)) << i;
    ASSERT_EQ(max_0a[size_t(i)], std::max(0.0, u)) << i;
    ASSERT_EQ(relu6[size_t(i)], std::min(std::max(u, 0.0), 6.0)) << i;
    ASSERT_EQ(leaky[size_t(i)], u >= 0 ? u : double(0.1f * a[size_t(i)])) << i;
  }
}

TEST(Unary, TranscendentalsMatchLibm) {
  std::vector<float> in = uniform_values(257, 1, 0.1f, 3.0f);
  Tensor x = from_vector(in, {257});
  struct Case {
    Tensor (*op)(const Tensor&, Loc);
    double (*ref)(double);
  } cases[] = {
      {exp, [](double v) { return std::exp(v); }},
      {log, [](double v) { return std::log(v); }},
      {sqrt, [](double v) { return std::sqrt(v); }},
      {rsqrt, [](double v) { return 1 / std::sqrt(v); }},
      {sin, [](double v) { return std::sin(v); }},
      {cos, [](double v) { return std::cos(v); }},
      {tanh, [](double v) { return std::tanh(v); }},
      {sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {silu, [](double v) { return v / (1 + std::exp(-v)); }},
      {erf, [](double v) { return std::erf(v); }},
      {reciprocal, [](double v) { return 1 / v; }},
  };
  for (const Case& c : cases) {
    std::vector<double> expected;
    for (float v : in) expected.push_back(c.ref(v));
    EXPECT_TRUE(all_close(values(c.op(x, Loc::current())), expected, 1e-5, 1e-6));
  }
}

TEST(Unary, GeluBothForms) {
  Tensor x = from_vector<float>({-1.0f, 0.0f, 1.0f, 2.0f}, {4});
  // erf form: 0.5 x (1 + erf(x / sqrt 2)); tanh form values from the published formula.
  EXPECT_TRUE(all_close(values(gelu(x)), {-0.15865525, 0, 0.84134475, 1.95449974}, 1e-5));
  EXPECT_TRUE(all_close(values(gelu(x, "tanh")), {-0.15880801, 0, 0.84119199, 1.95459769}, 1e-5));
  EXPECT_TRUE(all_close(values(elu(x)), {std::exp(-1.0) - 1, 0, 1, 2}, 1e-6));
  EXPECT_THROW(gelu(x, "fast"), Error);
}

TEST(Unary, IntegerAndBoolInputs) {
  Tensor i = from_vector<int64_t>({-3, 0, 4}, {3});
  EXPECT_EQ(abs(i).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 4}));
  EXPECT_EQ(neg(i).dtype(), DType::I64);
  EXPECT_EQ(relu(i).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 4}));
  Tensor b = from_vector<bool>({true, false}, {2});
  EXPECT_EQ(logical_not(b).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_THROW(exp(i), Error);  // float-only op on integers asks for a cast
}

TEST(Unary, HalfPrecisionWithinTolerance) {
  std::vector<float> in = uniform_values(64, 2);
  for (DType dt : {DType::F16, DType::BF16, DType::F64}) {
    Tensor x = from_vector(in, {64}).to(dt);
    Tensor y = tanh(x);
    EXPECT_EQ(y.dtype(), dt);
    std::vector<double> expected;
    for (float v : in) expected.push_back(std::tanh(v));
    double tol = dt == DType::BF16 ? 1e-2 : dt == DType::F16 ? 2e-3 : 1e-7;
    EXPECT_TRUE(all_close(values(y), expected, tol, tol)) << dtype_name(dt);
  }
}

TEST(Cast, ConvertsBetweenAllDTypes) {
  Tensor x = from_vector<float>({-1.5f, 0.0f, 2.7f}, {3});
  EXPECT_EQ(cast(x, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 2}));
  EXPECT_EQ(cast(x, DType::Bool).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(cast(cast(x, DType::F16), DType::F32).to_vector<float>(),
            (std::vector<float>{-1.5f, 0.0f, float(half(2.7f))}));
}

// Naive broadcast reference: index each operand by the output coordinate.
std::vector<double> naive_broadcast(const std::vector<float>& a, std::vector<int64_t> ad,
                                    const std::vector<float>& b, std::vector<int64_t> bd,
                                    const std::vector<int64_t>& od, double (*f)(double, double)) {
  while (ad.size() < od.size()) ad.insert(ad.begin(), 1);
  while (bd.size() < od.size()) bd.insert(bd.begin(), 1);
  int64_t n = 1;
  for (int64_t d : od) n *= d;
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t k = od.size(); k-- > 0;) {
      int64_t c = rem % od[k];
      rem /= od[k];
      ia += (ad[k] == 1 ? 0 : c) * sa;
      ib += (bd[k] == 1 ? 0 : c) * sb;
      sa *= ad[k];
      sb *= bd[k];
    }
    out.push_back(f(a[size_t(ia)], b[size_t(ib)]));
  }
  return out;
}

TEST(Binary, BroadcastingMatchesNaiveLoop) {
  std::vector<float> a = uniform_values(2 * 3 * 4, 3), b = uniform_values(3 * 1, 4, 0.5f, 2.0f);
  Tensor ta = from_vector(a, {2, 3, 4}), tb = from_vector(b, {3, 1});
  std::vector<int64_t> od = {2, 3, 4};
  struct Case {
    Tensor (*op)(const Tensor&, const Tensor&, Loc);
    double (*ref)(double, double);
  } cases[] = {
      {add, [](double x, double y) { return x + y; }},
      {sub, [](double x, double y) { return x - y; }},
      {mul, [](double x, double y) { return x * y; }},
      {div, [](double x, double y) { return x / y; }},
      {maximum, [](double x, double y) { return std::max(x, y); }},
      {minimum, [](double x, double y) { return std::min(x, y); }},
      {pow, [](double x, double y) { return std::pow(std::abs(x), y); }},
      {remainder, [](double x, double y) { double r = std::fmod(x, y); return (r != 0 && (r < 0) != (y < 0)) ? r + y : r; }},
      {fmod, [](double x, double y) { return std::fmod(x, y); }},
  };
  for (const Case& c : cases) {
    Tensor lhs = c.op == static_cast<Tensor (*)(const Tensor&, const Tensor&, Loc)>(pow) ? abs(ta) : ta;
    Tensor out = c.op(lhs, tb, Loc::current());
    EXPECT_EQ(out.sizes(), od);
    EXPECT_TRUE(all_close(values(out), naive_broadcast(a, {2, 3, 4}, b, {3, 1}, od, c.ref), 1e-5, 1e-6));
  }
}

// Operands that are one block of the output's dims (a per-channel scale [C,1,1] of [N,C,H,W], a
// [C,H,1] block, a scalar) run as runs over which the block reads one element; two blocks ([N,1,H,1])
// walk indices. 3x5x37x61 elements span more than one of the thread pool's chunks, the later ones
// starting inside a run. Both operand orders, against the naive loop.
TEST(Binary, BlockBroadcastsMatchANaiveLoop) {
  const std::vector<int64_t> od = {3, 5, 37, 61};
  const std::vector<float> x = uniform_values(3 * 5 * 37 * 61, 21);
  const std::vector<std::vector<int64_t>> shapes = {{5, 1, 1}, {1, 5, 1, 1}, {5, 37, 1}, {3, 5, 1, 1},
                                                    {3, 1, 37, 1}, {1}, {37, 61}};
  for (const std::vector<int64_t>& bd : shapes) {
    int64_t count = 1;
    for (int64_t d : bd) count *= d;
    const std::vector<float> b = uniform_values(size_t(count), 22, 0.5f, 2.0f);
    const Tensor tx = from_vector(x, od), tb = from_vector(b, bd);
    auto minus = [](double u, double v) { return u - v; };
    EXPECT_TRUE(all_close(values(tx - tb), naive_broadcast(x, od, b, bd, od, minus))) << shape_str(make_shape(bd));
    EXPECT_TRUE(all_close(values(tb - tx), naive_broadcast(b, bd, x, od, od, minus))) << shape_str(make_shape(bd));
  }
  // where: a per-channel condition, a full operand and a scalar.
  std::vector<uint8_t> keep = {1, 0, 1, 1, 0};
  const Tensor cond = cast(from_vector(keep, {5, 1, 1}), DType::Bool);
  const std::vector<double> got = values(where(cond, from_vector(x, od), from_vector<float>({-7.0f}, {1})));
  std::vector<double> want;
  for (size_t i = 0; i < x.size(); ++i) want.push_back(keep[i / (37 * 61) % 5] ? double(x[i]) : -7.0);
  EXPECT_TRUE(all_close(got, want));
}

TEST(Binary, ComparisonsAndLogicalGiveBool) {
  Tensor a = from_vector<float>({1, 2, 3}, {3}), b = from_vector<float>({2, 2, 2}, {3});
  EXPECT_EQ(lt(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(le(a, b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(eq(a, b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(ne(a, b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(gt(a, 1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(ge(a, b).dtype(), DType::Bool);
  Tensor p = from_vector<bool>({true, true, false, false}, {4});
  Tensor q = from_vector<bool>({true, false, true, false}, {4});
  EXPECT_EQ(logical_and(p, q).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(logical_or(p, q).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(logical_xor(p, q).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
}

TEST(Binary, IntegerSemantics) {
  Tensor a = from_vector<int32_t>({7, -7, 7, -7}, {4}), b = from_vector<int32_t>({2, 2, -2, -2}, {4});
  EXPECT_EQ(div(a, b).to_vector<int32_t>(), (std::vector<int32_t>{3, -3, -3, 3}));  // truncates
  EXPECT_EQ(remainder(a, b).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, -1, -1}));
  EXPECT_EQ(fmod(a, b).to_vector<int32_t>(), (std::vector<int32_t>{1, -1, 1, -1}));
  EXPECT_EQ(pow(from_vector<int64_t>({3, 2}, {2}), from_vector<int64_t>({4, 10}, {2})).to_vector<int64_t>(),
            (std::vector<int64_t>{81, 1024}));
  EXPECT_THROW(div(a, from_vector<int32_t>({0}, {1})), Error);
}

TEST(Binary, MixedDTypesPromote) {
  Tensor i = from_vector<int32_t>({1, 2}, {2});
  Tensor f = from_vector<float>({0.5f, 0.25f}, {2});
  Tensor out = i + f;
  EXPECT_EQ(out.dtype(), DType::F32);
  EXPECT_TRUE(all_close(values(out), {1.5, 2.25}));
  EXPECT_EQ((i * 2.5).dtype(), DType::F32);  // fractional scalar promotes an integer tensor
  EXPECT_EQ((i * 2).dtype(), DType::I32);
}

TEST(Binary, OperatorsWithScalars) {
  Tensor x = from_vector<float>({1, 2}, {2});
  EXPECT_TRUE(all_close(values(x * 2.0f + 1.0), {3, 5}));
  EXPECT_TRUE(all_close(values(1.0 - x), {0, -1}));
  EXPECT_TRUE(all_close(values(6.0 / x), {6, 3}));
  EXPECT_TRUE(all_close(values(-x), {-1, -2}));
  EXPECT_TRUE(all_close(values(x / x), {1, 1}));
}

TEST(Where, SelectsWithBroadcast) {
  Tensor c = from_vector<bool>({true, false}, {2, 1});
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = from_vector<float>({-1}, {1});
  EXPECT_TRUE(all_close(values(where(c, a, b)), {1, 2, 3, -1, -1, -1}));
  EXPECT_THROW(where(a, a, b), Error);  // condition must be bool
}

// where moves elements of 1, 2, 4 and 8 bytes, broadcast on every side.
TEST(Where, SelectsEveryElementSize) {
  const Tensor c = from_vector<bool>({true, false, false, true}, {2, 2});
  const Tensor a = from_vector<double>({1, 2}, {1, 2}), b = from_vector<double>({-1, -2}, {2, 1});
  const std::vector<double> want = {1, -1, -2, 2};
  for (DType dtype : {DType::U8, DType::F16, DType::I32, DType::F32, DType::F64, DType::I64})
    EXPECT_EQ(where(c, cast(abs(a), dtype), cast(abs(b) * 3.0, dtype)).to_vector<double>(),
              (std::vector<double>{1, 3, 6, 2}))
        << dtype_name(dtype);
  EXPECT_EQ(where(c, a, b).to_vector<double>(), want);
  EXPECT_EQ(where(c, from_vector<bool>({true, true}, {2}), from_vector<bool>({false}, {1})).to_vector<bool>(),
            (std::vector<bool>{true, false, false, true}));
}

TEST(Binary, ShapeMismatchNamesOpShapesAndLine) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  int line = __LINE__ + 2;
  try {
    add(a, b);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("op 'add'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[2,3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("pointwise_test.cpp:" + std::to_string(line)), std::string::npos) << msg;
  }
}

TEST(Binary, OperatorErrorPointsAtTheExpression) {
  Tensor a = zeros({2}), b = zeros({3});
  int line = __LINE__ + 2;
  try {
    Tensor c = a + b;
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":" + std::to_string(line)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
