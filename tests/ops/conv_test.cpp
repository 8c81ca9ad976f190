// Conv-family ops (conv, conv_transpose, pools) on the cpu reference backend against hand-derived
// values and naive loops written here from the definitions. Tolerances: f32 1e-4 (sums of up to
// ~300 products), f64 1e-10, f16 3e-2 and bf16 2e-1 (16-bit inputs and output rounding).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "core/frontend/dispatch.h"
#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::Dims64;
using testing::expect_error;
using testing::product;

using testing::all_close;
using testing::uniform_values;
using testing::values;

// Window parameters of a 2-d case (1-d cases use h = kh = 1).
struct Window {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// Direct definition of cross-correlation with zero padding: x [n,c,h,w], w [o,c/g,kh,kw].
std::vector<double> naive_conv(const std::vector<double>& x, const Dims64& xd,
                               const std::vector<double>& w, const Dims64& wd,
                               const std::vector<double>& bias, const Window& p, Dims64* od) {
  const int64_t n = xd[0], c = xd[1], h = xd[2], wi = xd[3];
  const int64_t o = wd[0], cg = wd[1], kh = wd[2], kw = wd[3], og = o / p.groups;
  const int64_t oh = (h + 2 * p.ph - p.dh * (kh - 1) - 1) / p.sh + 1;
  const int64_t ow = (wi + 2 * p.pw - p.dw * (kw - 1) - 1) / p.sw + 1;
  *od = {n, o, oh, ow};
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          double s = bias.empty() ? 0 : bias[size_t(oc)];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = r * p.sh - p.ph + i * p.dh, iw = q * p.sw - p.pw + j * p.dw;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wi) continue;
                const int64_t channel = (oc / og) * cg + ci;
                s += x[size_t(((b * c + channel) * h + ih) * wi + iw)] *
                     w[size_t(((oc * cg + ci) * kh + i) * kw + j)];
              }
          y.push_back(s);
        }
  return y;
}

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// 1, 2, 3, ... in the given f32 shape.
Tensor iota(const Dims64& dims) {
  std::vector<float> v(size_t(product(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i + 1);
  return from_vector(v, dims);
}

struct ConvCase {
  Dims64 x;  // [n, c, h, w]
  int64_t out_channels, kh, kw;
  Window p;
  bool bias;
};

void expect_conv2d_matches(const ConvCase& c, uint64_t seed, DType dtype = DType::F32,
                           double tol = 1e-4) {
  const Dims64 wd = {c.out_channels, c.x[1] / c.p.groups, c.kh, c.kw};
  Tensor tx = from_vector(uniform_values(size_t(product(c.x)), seed), c.x).to(dtype);
  Tensor tw = from_vector(uniform_values(size_t(product(wd)), seed + 1), wd).to(dtype);
  Tensor tb = c.bias
                  ? from_vector(uniform_values(size_t(c.out_channels), seed + 2), {c.out_channels})
                        .to(dtype)
                  : Tensor();
  Dims64 od;
  std::vector<double> expected = naive_conv(values(tx), c.x, values(tw), wd,
                                            c.bias ? values(tb) : std::vector<double>{}, c.p, &od);
  Tensor out = conv2d(tx, tw, tb, {c.p.sh, c.p.sw}, {c.p.ph, c.p.pw}, {c.p.dh, c.p.dw}, c.p.groups);
  EXPECT_EQ(out.dtype(), dtype);
  EXPECT_EQ(out.sizes(), od);
  EXPECT_TRUE(all_close(values(out), expected, tol, tol)) << "seed " << seed;
}

TEST(Conv, HandValuesOneChannel3x3) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  // A 3x3 box filter with padding 1 sums each pixel's neighbourhood.
  Tensor box = conv2d(x, ones({1, 1, 3, 3}), {}, 1, 1);
  EXPECT_EQ(box.sizes(), (Dims64{1, 1, 3, 3}));
  EXPECT_TRUE(all_close(values(box), {12, 21, 16, 27, 45, 33, 24, 39, 28}));
  // Unpadded 2x2 kernel [[1,2],[3,4]]: e.g. top-left 1*1 + 2*2 + 3*4 + 4*5 = 37; plus bias 0.5.
  Tensor k = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor out = conv2d(x, k, from_vector<float>({0.5f}, {1}));
  EXPECT_TRUE(all_close(values(out), {37.5, 47.5, 67.5, 77.5}));
  // Stride 2 with padding 1 keeps the corners of the box filter.
  EXPECT_TRUE(all_close(values(conv2d(x, ones({1, 1, 3, 3}), {}, 2, 1)), {12, 16, 24, 28}));
}

TEST(Conv, StridePaddingDilationMatchNaiveLoop) {
  expect_conv2d_matches({{2, 3, 7, 8}, 4, 3, 3, {}, true}, 1);
  expect_conv2d_matches({{2, 3, 7, 8}, 4, 3, 3, {1, 1, 1, 1, 1, 1, 1}, true}, 2);
  expect_conv2d_matches({{1, 2, 9, 10}, 3, 3, 2, {2, 1, 0, 2, 2, 1, 1}, false}, 3);
  expect_conv2d_matches({{2, 3, 6, 6}, 2, 2, 2, {3, 2, 1, 1, 1, 2, 1}, true}, 4);
}

TEST(Conv, GroupsAndDepthwiseMatchNaiveLoop) {
  expect_conv2d_matches({{2, 4, 7, 6}, 6, 3, 2, {2, 2, 1, 1, 1, 1, 2}, true}, 5);
  expect_conv2d_matches({{2, 5, 8, 8}, 5, 3, 3, {1, 1, 1, 1, 1, 1, 5}, true}, 6);   // depthwise
  expect_conv2d_matches({{1, 4, 9, 9}, 8, 3, 3, {2, 2, 2, 2, 2, 2, 4}, false}, 7);  // multiplier 2
}

TEST(Conv, PointwiseAndLargeChannelCountsMatchNaiveLoop) {
  expect_conv2d_matches({{2, 6, 5, 7}, 10, 1, 1, {}, true}, 8);  // reads x directly
  expect_conv2d_matches({{2, 6, 5, 7}, 10, 1, 1, {2, 2, 0, 0, 1, 1, 1}, true}, 9);
  expect_conv2d_matches({{1, 32, 20, 21}, 9, 3, 3, {1, 1, 1, 1, 1, 1, 1}, true}, 10);  // K > 256
  // Small planes with many output channels split the channels across tasks (6-row tails).
  expect_conv2d_matches({{1, 40, 4, 5}, 64, 3, 3, {1, 1, 1, 1, 1, 1, 1}, true}, 20);
  expect_conv2d_matches({{2, 6, 11, 13}, 6, 3, 3, {2, 2, 1, 1, 2, 2, 6}, true}, 21);  // depthwise, stride 2
}

TEST(Conv, FloatDTypesWithinTolerance) {
  const ConvCase c{{2, 4, 6, 7}, 6, 3, 3, {2, 1, 1, 1, 1, 1, 2}, true};
  expect_conv2d_matches(c, 11, DType::F64, 1e-10);
  expect_conv2d_matches(c, 12, DType::F16, 3e-2);
  expect_conv2d_matches(c, 13, DType::BF16, 2e-1);
}

TEST(Conv, OneDimensionalMatchesNaiveLoop) {
  for (const auto& [stride, padding, dilation, groups, channels_out] :
       std::vector<std::array<int64_t, 5>>{{1, 0, 1, 1, 4}, {2, 1, 2, 1, 4}, {1, 2, 1, 3, 6}}) {
    const Dims64 xd = {2, 3, 11}, wd = {channels_out, 3 / groups, 3};
    std::vector<float> x = uniform_values(size_t(product(xd)), 14),
                       w = uniform_values(size_t(product(wd)), 15);
    std::vector<float> b = uniform_values(size_t(channels_out), 16);
    Window p;
    p.sw = stride;
    p.pw = padding;
    p.dw = dilation;
    p.groups = groups;
    Dims64 od;
    // The 1-d case is the 2-d definition with height 1.
    std::vector<double> expected = naive_conv(doubles(x), {2, 3, 1, 11}, doubles(w),
                                              {channels_out, 3 / groups, 1, 3}, doubles(b), p, &od);
    Tensor out = conv1d(from_vector(x, xd), from_vector(w, wd), from_vector(b, {channels_out}),
                        stride, padding, dilation, groups);
    EXPECT_EQ(out.sizes(), (Dims64{od[0], od[1], od[3]}));
    EXPECT_TRUE(all_close(values(out), expected, 1e-4, 1e-4))
        << stride << padding << dilation << groups;
  }
}

TEST(Conv, AsymmetricOnnxPadding) {
  // padding [top, left, bottom, right] = [0, 1, 2, 0]; equals padding the input by hand.
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor out = run_op1(OpKind::Conv, {x, ones({1, 1, 2, 2})},
                       {{"padding", std::vector<int64_t>{0, 1, 2, 0}}}, Loc::current());
  // Padded input rows: [0 1 2], [0 3 4], [0 0 0], [0 0 0]; 2x2 sums.
  EXPECT_EQ(out.sizes(), (Dims64{1, 1, 3, 2}));
  EXPECT_TRUE(all_close(values(out), {4, 10, 3, 7, 0, 0}));
}

TEST(Conv, ErrorsNameOpAndShapes) {
  expect_error(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3}));
      },
      {"op 'conv'", "f32[1,3,5,5]", "f32[4,2,3,3]", "channel mismatch", "conv_test.cpp"});
  expect_error(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 1, 3, 3}), {}, 1, 0, 1, 2);
      },
      {"op 'conv'", "f32[1,3,5,5]", "groups 2 must divide"});
  expect_error(
      [] {
        conv2d(zeros({1, 3, 2, 5}), zeros({4, 3, 3, 3}));
      },
      {"op 'conv'", "f32[1,3,2,5]", "f32[4,3,3,3]", "larger than the padded input"});
  expect_error(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), zeros({3}));
      },
      {"op 'conv'", "f32[3]", "bias"});
  expect_error(
      [] {
        conv2d(zeros({1, 3, 5, 5}, DType::I32), zeros({4, 3, 3, 3}, DType::I32));
      },
      {"op 'conv'", "floating-point"});
  expect_error([] { conv2d(zeros({3, 5, 5}), zeros({4, 3, 3})); }, {"op 'conv'", "f32[3,5,5]"});
  expect_error(
      [] {
        conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), {}, 0);
      },
      {"op 'conv'", "stride"});
}

// Transposed convolution by its definition: every input pixel scatters x * w into the output.
std::vector<double> naive_conv_transpose(const std::vector<double>& x, const Dims64& xd,
                                         const std::vector<double>& w, const Dims64& wd,
                                         const std::vector<double>& bias, const Window& p,
                                         int64_t oph, int64_t opw, Dims64* od) {
  const int64_t n = xd[0], c = xd[1], h = xd[2], wi = xd[3];
  const int64_t og = wd[1], kh = wd[2], kw = wd[3], cg = c / p.groups, o = og * p.groups;
  const int64_t oh = (h - 1) * p.sh - 2 * p.ph + p.dh * (kh - 1) + oph + 1;
  const int64_t ow = (wi - 1) * p.sw - 2 * p.pw + p.dw * (kw - 1) + opw + 1;
  *od = {n, o, oh, ow};
  std::vector<double> y(size_t(n * o * oh * ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t k = 0; k < oh * ow; ++k)
        y[size_t((b * o + oc) * oh * ow + k)] = bias.empty() ? 0 : bias[size_t(oc)];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < wi; ++iw)
          for (int64_t o2 = 0; o2 < og; ++o2)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t r = ih * p.sh - p.ph + i * p.dh, q = iw * p.sw - p.pw + j * p.dw;
                if (r < 0 || r >= oh || q < 0 || q >= ow) continue;
                const int64_t oc = (ci / cg) * og + o2;
                y[size_t(((b * o + oc) * oh + r) * ow + q)] +=
                    x[size_t(((b * c + ci) * h + ih) * wi + iw)] *
                    w[size_t(((ci * og + o2) * kh + i) * kw + j)];
              }
  return y;
}

TEST(ConvTranspose, HandValuesStride2) {
  // Each input pixel stamps a copy of the 2x2 kernel scaled by itself; stride 2 tiles them.
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor w = from_vector<float>({1, 10, 100, 1000}, {1, 1, 2, 2});
  Tensor out = conv_transpose2d(x, w, {}, 2);
  EXPECT_EQ(out.sizes(), (Dims64{1, 1, 4, 4}));
  EXPECT_TRUE(all_close(values(out),
                        {1, 10, 2, 20, 100, 1000, 200, 2000, 3, 30, 4, 40, 300, 3000, 400, 4000}));
}

TEST(ConvTranspose, StrideOutputPaddingGroupsMatchNaiveLoop) {
  struct Case {
    Dims64 x;
    int64_t out_per_group, kh, kw;
    Window p;
    int64_t oph, opw;
    bool bias;
  } cases[] = {
      {{2, 3, 4, 5}, 2, 3, 3, {2, 2, 1, 1, 1, 1, 1}, 1, 1, true},
      {{1, 4, 3, 4}, 3, 3, 2, {2, 1, 0, 1, 1, 1, 2}, 1, 0, true},
      {{2, 2, 5, 3}, 2, 2, 3, {1, 2, 0, 0, 2, 1, 1}, 0, 1, false},
      {{1, 16, 6, 6}, 4, 4, 4, {2, 2, 1, 1, 1, 1, 1}, 0, 0, true},
  };
  uint64_t seed = 20;
  for (const Case& c : cases) {
    const Dims64 wd = {c.x[1], c.out_per_group, c.kh, c.kw};
    const int64_t o = c.out_per_group * c.p.groups;
    std::vector<float> x = uniform_values(size_t(product(c.x)), seed++);
    std::vector<float> w = uniform_values(size_t(product(wd)), seed++);
    std::vector<float> b = uniform_values(size_t(o), seed++);
    for (DType dtype : {DType::F32, DType::F64, DType::F16}) {
      const double tol = dtype == DType::F16 ? 3e-2 : 1e-4;
      Tensor tx = from_vector(x, c.x).to(dtype), tw = from_vector(w, wd).to(dtype);
      Tensor tb = c.bias ? from_vector(b, {o}).to(dtype) : Tensor();
      // The reference sees the same (rounded) inputs, so only the op's own rounding counts.
      Dims64 od;
      std::vector<double> expected =
          naive_conv_transpose(values(tx), c.x, values(tw), wd,
                               c.bias ? values(tb) : std::vector<double>{}, c.p, c.oph, c.opw, &od);
      Tensor out = conv_transpose2d(tx, tw, tb, {c.p.sh, c.p.sw}, {c.p.ph, c.p.pw}, {c.oph, c.opw},
                                    c.p.groups, {c.p.dh, c.p.dw});
      EXPECT_EQ(out.sizes(), od);
      EXPECT_TRUE(all_close(values(out), expected, tol, tol))
          << dtype_name(dtype) << " seed " << seed;
    }
  }
}

TEST(ConvTranspose, OneDimensionalViaOp) {
  // Stride 2 places each input's copy of the kernel [1, 10] side by side.
  Tensor x = from_vector<float>({1, 2, 3}, {1, 1, 3});
  Tensor w = from_vector<float>({1, 10}, {1, 1, 2});
  Tensor out =
      run_op1(OpKind::ConvTranspose, {x, w}, {{"stride", std::vector<int64_t>{2}}}, Loc::current());
  EXPECT_EQ(out.sizes(), (Dims64{1, 1, 6}));
  EXPECT_TRUE(all_close(values(out), {1, 10, 2, 20, 3, 30}));
}

TEST(ConvTranspose, ErrorsNameOpAndShapes) {
  expect_error(
      [] {
        conv_transpose2d(zeros({1, 3, 4, 4}), zeros({2, 2, 3, 3}));
      },
      {"op 'conv_transpose'", "f32[1,3,4,4]", "f32[2,2,3,3]", "channel mismatch"});
  expect_error(
      [] {
        conv_transpose2d(zeros({1, 2, 4, 4}), zeros({2, 2, 3, 3}), {}, 2, 0, 2);
      },
      {"op 'conv_transpose'", "output_padding"});
  expect_error(
      [] {
        conv_transpose2d(zeros({1, 3, 4, 4}), zeros({3, 2, 3, 3}), {}, 1, 0, 0, 2);
      },
      {"op 'conv_transpose'", "groups 2"});
  expect_error(
      [] {
        conv_transpose2d(zeros({1, 2, 1, 1}), zeros({2, 2, 1, 1}), {}, 1, 1);
      },
      {"op 'conv_transpose'", "less than 1"});
}

TEST(Pool, MaxHandValues) {
  Tensor x = iota({1, 1, 4, 4});
  EXPECT_TRUE(all_close(values(max_pool2d(x, 2)), {6, 8, 14, 16}));
  Tensor x9 = iota({1, 1, 3, 3});
  // 3x3 windows with padding 1: padding never wins.
  EXPECT_TRUE(all_close(values(max_pool2d(x9, 3, 1, 1)), {5, 6, 6, 8, 9, 9, 8, 9, 9}));
}

TEST(Pool, MaxCeilModeKeepsPartialWindows) {
  Tensor x = iota({1, 1, 5, 5});
  EXPECT_TRUE(all_close(values(max_pool2d(x, 2)), {7, 9, 17, 19}));
  Tensor ceil = max_pool2d(x, 2, std::nullopt, 0, 1, true);
  EXPECT_EQ(ceil.sizes(), (Dims64{1, 1, 3, 3}));
  EXPECT_TRUE(all_close(values(ceil), {7, 9, 10, 17, 19, 20, 22, 24, 25}));
  // Width 5, kernel 2, stride 2, padding 1: a 4th window would start in the right padding.
  Tensor row = iota({1, 1, 1, 5});
  Tensor r = max_pool2d(row, {1, 2}, Int2{1, 2}, {0, 1}, 1, true);
  EXPECT_EQ(r.sizes(), (Dims64{1, 1, 1, 3}));
  EXPECT_TRUE(all_close(values(r), {1, 3, 5}));
}

TEST(Pool, AvgCountIncludePadBothWays) {
  Tensor x = iota({1, 1, 3, 3});
  Tensor with_pad = avg_pool2d(x, 3, 1, 1, false, true);
  EXPECT_TRUE(all_close(values(with_pad), {12 / 9.0, 21 / 9.0, 16 / 9.0, 27 / 9.0, 5, 33 / 9.0,
                                           24 / 9.0, 39 / 9.0, 28 / 9.0}));
  Tensor without_pad = avg_pool2d(x, 3, 1, 1, false, false);
  EXPECT_TRUE(all_close(values(without_pad), {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}));
}

TEST(Pool, AvgCeilModeDivisorsFollowPyTorch) {
  Tensor x = iota({1, 1, 3, 3});
  EXPECT_TRUE(all_close(values(avg_pool2d(x, 2, std::nullopt, 0, true)), {3, 4.5, 7.5, 9}));
  // [1 2 3 4], kernel 3, stride 2, padding 1, ceil: windows [-1,2), [1,4), [3,6) clipped to the
  // padded extent [-1,5): the last counts 2 positions with padding, 1 without.
  Tensor row = iota({1, 1, 1, 4});
  EXPECT_TRUE(
      all_close(values(avg_pool2d(row, {1, 3}, Int2{1, 2}, {0, 1}, true, true)), {1, 3, 2}));
  EXPECT_TRUE(
      all_close(values(avg_pool2d(row, {1, 3}, Int2{1, 2}, {0, 1}, true, false)), {1.5, 3, 4}));
}

// Pool by definition over a [planes, h, w] input; the avg divisor follows PyTorch (window clipped
// to the padded input when counting padding, to the input otherwise).
std::vector<double> naive_pool(const std::vector<double>& x, int64_t planes, int64_t h, int64_t w,
                               int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil_mode,
                               bool is_max, bool include_pad, int64_t* out_size) {
  auto size = [&](int64_t in) {
    const int64_t num = in + 2 * pad - dil * (k - 1) - 1;
    int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) --o;
    return o;
  };
  const int64_t oh = size(h), ow = size(w);
  *out_size = oh;
  std::vector<double> y;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t q = 0; q < ow; ++q) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t ih = r * s - pad + i * dil, iw = q * s - pad + j * dil;
            if (ih < h + pad && iw < w + pad) ++padded;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double v = x[size_t((p * h + ih) * w + iw)];
            best = std::max(best, v);
            sum += v;
            ++inside;
          }
        y.push_back(is_max ? best : sum / double(include_pad ? padded : inside));
      }
  return y;
}

TEST(Pool, RandomizedMatchNaiveLoop) {
  const int64_t planes = 2 * 3, h = 9, w = 9;
  std::vector<float> x = uniform_values(size_t(planes * h * w), 40);
  Tensor tx = from_vector(x, {2, 3, h, w});
  for (int64_t k : {2, 3})
    for (int64_t s : {1, 2})
      for (int64_t pad : {int64_t(0), k / 2})
        for (bool ceil_mode : {false, true}) {
          int64_t o = 0;
          for (int64_t dil : {1, 2}) {
            std::vector<double> expected =
                naive_pool(doubles(x), planes, h, w, k, s, pad, dil, ceil_mode, true, false, &o);
            Tensor out = max_pool2d(tx, k, s, pad, dil, ceil_mode);
            EXPECT_EQ(out.sizes(), (Dims64{2, 3, o, o}));
            EXPECT_TRUE(all_close(values(out), expected)) << k << s << pad << dil << ceil_mode;
          }
          for (bool include_pad : {false, true}) {
            std::vector<double> expected = naive_pool(doubles(x), planes, h, w, k, s, pad, 1,
                                                      ceil_mode, false, include_pad, &o);
            Tensor out = avg_pool2d(tx, k, s, pad, ceil_mode, include_pad);
            EXPECT_EQ(out.sizes(), (Dims64{2, 3, o, o}));
            EXPECT_TRUE(all_close(values(out), expected, 1e-5, 1e-6)) << k << s << pad << ceil_mode;
          }
        }
}

TEST(Pool, DTypes) {
  Tensor xi = from_vector<int32_t>({3, -1, 7, 2, 0, 5, -4, 9, 1}, {1, 1, 3, 3});
  Tensor mi = max_pool2d(xi, 2, 1);
  EXPECT_EQ(mi.dtype(), DType::I32);
  EXPECT_EQ(mi.to_vector<int32_t>(), (std::vector<int32_t>{3, 7, 9, 9}));
  std::vector<float> x = uniform_values(2 * 8 * 8, 41);
  int64_t o = 0;
  for (DType dtype : {DType::F64, DType::F16, DType::BF16}) {
    Tensor tx = from_vector(x, {1, 2, 8, 8}).to(dtype);
    std::vector<double> exp_dtype =
        naive_pool(values(tx), 2, 8, 8, 2, 2, 1, 1, false, false, true, &o);
    Tensor out = avg_pool2d(tx, 2, 2, 1);
    EXPECT_EQ(out.dtype(), dtype);
    const double tol = dtype == DType::F64 ? 1e-12 : dtype == DType::F16 ? 2e-3 : 1e-2;
    EXPECT_TRUE(all_close(values(out), exp_dtype, tol, tol)) << dtype_name(dtype);
  }
  EXPECT_THROW(avg_pool2d(xi, 2), Error);  // averages need a floating-point input
}

TEST(Pool, OneDimensionalViaOp) {
  Tensor x = from_vector<float>({1, 5, 2, 8, 3, 1, 9}, {1, 1, 7});
  Tensor m = run_op1(OpKind::MaxPool, {x},
                     {{"kernel", std::vector<int64_t>{3}}, {"stride", std::vector<int64_t>{2}}},
                     Loc::current());
  EXPECT_EQ(m.sizes(), (Dims64{1, 1, 3}));
  EXPECT_TRUE(all_close(values(m), {5, 8, 9}));
  Tensor a = run_op1(OpKind::AvgPool, {x}, {{"kernel", std::vector<int64_t>{2}}}, Loc::current());
  EXPECT_TRUE(all_close(values(a), {3, 3.5, 5, 5.5, 2, 5}));  // ONNX default stride 1
}

TEST(Pool, ErrorsNameOpAndShapes) {
  expect_error(
      [] {
        max_pool2d(zeros({1, 2, 3, 3}), 4);
      },
      {"op 'max_pool'", "f32[1,2,3,3]", "larger than the padded input"});
  expect_error(
      [] {
        max_pool2d(zeros({1, 2, 6, 6}), 2, 2, 2);
      },
      {"op 'max_pool'", "f32[1,2,6,6]", "at most half"});
  expect_error([] { avg_pool2d(zeros({2, 6, 6}), 2); }, {"op 'avg_pool'", "f32[2,6,6]"});
  expect_error(
      [] {
        run_op1(OpKind::MaxPool, {zeros({1, 1, 4, 4})}, {}, Loc::current());
      },
      {"op 'max_pool'", "kernel"});
}

// max_pool's gradient, values by hand: each window's gradient lands on the first tap holding its
// maximum; overlapping windows that share a winner add up.
TEST(Pool, MaxPoolGradSendsEachWindowsGradientToItsFirstMaximum) {
  const AttrMap k3s2{{"kernel", std::vector<int64_t>{3}}, {"stride", std::vector<int64_t>{2}}};
  Tensor x = from_vector<float>({1, 5, 2, 8, 3, 1, 9}, {1, 1, 7});
  Tensor g = from_vector<float>({10, 20, 30}, {1, 1, 3});
  EXPECT_TRUE(all_close(values(run_op1(OpKind::MaxPoolGrad, {x, g}, k3s2, Loc::current())), {0, 10, 0, 20, 0, 0, 30}));
  Tensor ties = from_vector<float>({4, 4, 1, 4, 2}, {1, 1, 5});
  Tensor g2 = from_vector<float>({1, 2}, {1, 1, 2});
  EXPECT_TRUE(all_close(values(run_op1(OpKind::MaxPoolGrad, {ties, g2}, k3s2, Loc::current())), {1, 0, 0, 2, 0}));
  const AttrMap k3s1{{"kernel", std::vector<int64_t>{3}}, {"stride", std::vector<int64_t>{1}}};
  Tensor shared = from_vector<float>({1, 9, 2, 0, 3}, {1, 1, 5});
  Tensor g3 = from_vector<float>({1, 2, 3}, {1, 1, 3});
  EXPECT_TRUE(all_close(values(run_op1(OpKind::MaxPoolGrad, {shared, g3}, k3s1, Loc::current())), {0, 3, 0, 0, 3}));
  expect_error([&] { run_op1(OpKind::MaxPoolGrad, {x, g2}, k3s2, Loc::current()); },
               {"op 'max_pool_grad'", "f32[1,1,7]", "f32[1,1,2]", "pooled shape f32[1,1,3]"});
}

// conv's weight gradient, values by hand: dW[k] = sum over windows o of g[o] * x[o * stride - pad + k].
TEST(Conv, WeightGradSumsEachTapsInputsWeightedByTheOutputGradient) {
  const AttrMap k2s2{{"kernel", std::vector<int64_t>{2}}, {"stride", std::vector<int64_t>{2}}};
  Tensor x = from_vector<float>({1, 2, 3, 4, 5}, {1, 1, 5});  // x[4] lies in no window
  Tensor g = from_vector<float>({10, 100}, {1, 1, 2});
  EXPECT_TRUE(all_close(values(run_op1(OpKind::ConvWeightGrad, {x, g}, k2s2, Loc::current())), {310, 420}));
  const AttrMap k3p1{{"kernel", std::vector<int64_t>{3}}, {"padding", std::vector<int64_t>{1, 1}}};
  Tensor three = from_vector<float>({1, 2, 3}, {1, 1, 3});
  Tensor ones = from_vector<float>({1, 1, 1}, {1, 1, 3});
  EXPECT_TRUE(all_close(values(run_op1(OpKind::ConvWeightGrad, {three, ones}, k3p1, Loc::current())), {3, 6, 5}));
  expect_error([&] { run_op1(OpKind::ConvWeightGrad, {x, from_vector<float>({1, 2, 3}, {1, 1, 3})}, k2s2, Loc::current()); },
               {"op 'conv_weight_grad'", "f32[1,1,5]", "f32[1,1,3]", "reach 6 past the padded input extent 5"});
}

TEST(GlobalAvgPool, MeansEverySpatialPlane) {
  std::vector<float> x = uniform_values(2 * 3 * 4 * 5, 50);
  Tensor out = global_avg_pool(from_vector(x, {2, 3, 4, 5}));
  EXPECT_EQ(out.sizes(), (Dims64{2, 3, 1, 1}));
  std::vector<double> expected;
  for (int p = 0; p < 6; ++p) {
    double s = 0;
    for (int i = 0; i < 20; ++i) s += x[size_t(p * 20 + i)];
    expected.push_back(s / 20);
  }
  EXPECT_TRUE(all_close(values(out), expected, 1e-6, 1e-6));
  Tensor one_d = global_avg_pool(from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 2, 3}));
  EXPECT_EQ(one_d.sizes(), (Dims64{1, 2, 1}));
  EXPECT_TRUE(all_close(values(one_d), {2, 5}));
  Tensor half_out = global_avg_pool(from_vector(x, {2, 3, 4, 5}).to(DType::F16));
  EXPECT_EQ(half_out.dtype(), DType::F16);
  EXPECT_TRUE(all_close(values(half_out), expected, 2e-3, 2e-3));
  expect_error([] { global_avg_pool(zeros({2, 3})); }, {"op 'global_avg_pool'", "f32[2,3]"});
}

TEST(Conv, ShapeRuleWithSymbolicBatch) {
  SymInt batch = SymInt::symbol("s0", 2);
  std::vector<TensorType> out = infer_types(
      OpKind::Conv, {{DType::F32, {batch, 3, 32, 32}}, {DType::F32, {8, 3, 3, 3}}},
      {{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}}},
      Provenance{});
  EXPECT_EQ(out[0].str(), "f32[s0,8,16,16]");
}

// channels_last: the same op on [N, H, W, C] activations gives the channels-first result, permuted.
// The reference runs both through one kernel, so they agree exactly.
TEST(Conv, ChannelsLastMatchesChannelsFirstPermuted) {
  using Ints = std::vector<int64_t>;
  const std::vector<int64_t> to_last = {0, 2, 3, 1}, to_first = {0, 3, 1, 2};
  auto expect_same = [&](OpKind kind, std::vector<Tensor> inputs, AttrMap attrs) {
    const Tensor first = run_op1(kind, inputs, attrs, Loc::current());
    attrs.set("channels_last", true);
    inputs[0] = permute(inputs[0], to_last);
    const Tensor last = run_op1(kind, inputs, attrs, Loc::current());
    EXPECT_EQ(last.sizes(), permute(first, to_last).sizes()) << op_name(kind);
    EXPECT_EQ(values(permute(last, to_first)), values(first)) << op_name(kind);
  };
  const Tensor x = randn({2, 4, 7, 6}, Device::ref(), 50);
  expect_same(OpKind::Conv, {x, randn({6, 2, 3, 3}, Device::ref(), 51), randn({6}, Device::ref(), 52)},
              {{"stride", Ints{2, 1}}, {"padding", Ints{1, 0, 1, 1}}, {"dilation", Ints{1, 2}}, {"groups", int64_t(2)}});
  expect_same(OpKind::MaxPool, {x}, {{"kernel", Ints{3, 2}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 0}}, {"ceil_mode", true}});
  expect_same(OpKind::AvgPool, {x}, {{"kernel", Ints{2, 3}}, {"padding", Ints{1, 1, 0, 1}}, {"count_include_pad", true}});
  std::vector<TensorType> out = infer_types(OpKind::Conv, {{DType::F32, {1, 9, 8, 4}}, {DType::F32, {5, 4, 3, 3}}},
                                            {{"channels_last", true}}, Provenance{});
  EXPECT_EQ(out[0].str(), "f32[1,7,6,5]");
  expect_error([] { run_op1(OpKind::Conv, {zeros({1, 8, 8, 4}), zeros({5, 3, 3, 3})}, {{"channels_last", true}}, Loc::current()); },
               {"op 'conv'", "f32[1,8,8,4]", "channel mismatch"});
}

}  // namespace
}  // namespace kiln
