// Views read in place by a compiled matmul: attention's head split and its keys' transpose, the
// halves of a packed projection, and the transposed operands of a linear layer's gradients, become
// strides of the matmul template's operands (FusionOptions::template_views) instead of copies. On every device, values are checked
// against products computed by hand in double; on devices whose matmul template takes strided
// operands the whole function is one kernel. Where the template declines at run time (a size
// below its threshold), the group's generic kernel reads the views through their index maps.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <kiln/kiln.h>

#include "backends/backend.h"
#include "support/devices.h"

namespace kiln {
namespace {

std::vector<Device> devices() { return testing::computing_devices(); }

// Devices whose compiled matmul runs a template that reads strided operands.
bool strided_template(const Device& device) {
  const std::string name = device.name();
  return name.rfind("vulkan", 0) == 0 || name.rfind("cpu", 0) == 0 || name.rfind("cuda", 0) == 0;
}

std::vector<float> values(int64_t n, float scale, float shift) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(std::sin(float(i) * scale + shift));
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << where << " element " << i;
}

// Attention's scores: q and k are [B, S, H, D]; scores[b][h][i][j] = sum_d q[b][i][h][d] k[b][j][h][d].
Tensor scores(const Tensor& q, const Tensor& k) {
  return matmul(permute(q, {0, 2, 1, 3}), permute(k, {0, 2, 3, 1}));
}

std::vector<double> scores_by_hand(const std::vector<float>& q, const std::vector<float>& k, int64_t b_n, int64_t s_n,
                                   int64_t h_n, int64_t d_n) {
  std::vector<double> out;
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < h_n; ++h)
      for (int64_t i = 0; i < s_n; ++i)
        for (int64_t j = 0; j < s_n; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < d_n; ++d)
            acc += double(q[size_t(((b * s_n + i) * h_n + h) * d_n + d)]) * k[size_t(((b * s_n + j) * h_n + h) * d_n + d)];
          out.push_back(acc);
        }
  return out;
}

TEST(CompileViews, AttentionScoresReadTheHeadSplitAndKeyTransposeInPlace) {
  const int64_t b = 2, s = 64, h = 2, d = 32;
  const std::vector<float> q = values(b * s * h * d, 0.37f, 0.1f), k = values(b * s * h * d, 0.23f, 1.3f);
  const std::vector<double> want = scores_by_hand(q, k, b, s, h, d);
  for (const Device& device : devices())
    for (Mode mode : {Mode::Default, Mode::ReduceOverhead}) {  // launched as planned, and replayed
      auto fast = compile([](const Tensor& q, const Tensor& k) { return scores(q, k); }, {.mode = mode});
      for (int call = 0; call < 2; ++call) {
        const Tensor got = fast(from_vector(q, {b, s, h, d}, device), from_vector(k, {b, s, h, d}, device));
        EXPECT_EQ(got.sizes(), (std::vector<int64_t>{b, h, s, s}));
        expect_close(got.to_vector<float>(), want, device.name() + " call " + std::to_string(call));
      }
      if (strided_template(device))
        EXPECT_EQ(fast.stats().program.kernels, 1) << device.name() << ": the permutes were copied";
    }
}

// Self-attention's packed projection: q and k are the two halves of one [B, S, 2 * H * D] tensor,
// split and reshaped into heads. The split's pieces are slices (expand-ops), which the template
// reads in place with the head split and key transpose: no copy of either half is written.
TEST(CompileViews, AttentionScoresReadThePiecesOfAPackedProjectionInPlace) {
  const int64_t b = 2, s = 64, h = 2, d = 32, e = h * d;
  const std::vector<float> packed = values(b * s * 2 * e, 0.41f, 0.6f);
  std::vector<float> q, k;
  for (int64_t row = 0; row < b * s; ++row)
    for (int64_t c = 0; c < 2 * e; ++c) (c < e ? q : k).push_back(packed[size_t(row * 2 * e + c)]);
  const std::vector<double> want = scores_by_hand(q, k, b, s, h, d);
  for (const Device& device : devices()) {
    auto fast = compile([](const Tensor& qk) {
      const std::vector<Tensor> halves = split(qk, qk.shape(2).hint() / 2, -1);
      const Dims heads{qk.shape(0), qk.shape(1), 2, qk.shape(2).hint() / 4};
      return scores(reshape(halves[0], heads), reshape(halves[1], heads));
    });
    const Tensor got = fast(from_vector(packed, {b, s, 2 * e}, device));
    expect_close(got.to_vector<float>(), want, device.name());
    if (strided_template(device)) EXPECT_EQ(fast.stats().program.kernels, 1) << device.name() << ": the halves were copied";
  }
}

// A linear layer's gradients: dx = g w (w read as stored), dw = g^T x (g transposed), and the
// forward x w^T (w transposed): each a matmul of a transposed operand.
TEST(CompileViews, TransposedOperandsOfALinearLayersProductsAreReadInPlace) {
  const int64_t m = 96, n = 80, kk = 128;  // above the Vulkan template's threshold
  const std::vector<float> x = values(m * kk, 0.11f, 0.5f), w = values(n * kk, 0.19f, 2.0f), g = values(m * n, 0.07f, 0.9f);
  std::vector<double> forward, weight_grad;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < kk; ++c) acc += double(x[size_t(i * kk + c)]) * w[size_t(j * kk + c)];
      forward.push_back(acc);
    }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < kk; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < m; ++i) acc += double(g[size_t(i * n + j)]) * x[size_t(i * kk + c)];
      weight_grad.push_back(acc);
    }
  for (const Device& device : devices()) {
    auto linear_fn = compile([](const Tensor& a, const Tensor& b) { return matmul(a, transpose(b, 0, 1)); });
    auto grad_fn = compile([](const Tensor& a, const Tensor& b) { return matmul(transpose(a, 0, 1), b); });
    expect_close(linear_fn(from_vector(x, {m, kk}, device), from_vector(w, {n, kk}, device)).to_vector<float>(), forward,
                 device.name() + " x w^T");
    expect_close(grad_fn(from_vector(g, {m, n}, device), from_vector(x, {m, kk}, device)).to_vector<float>(), weight_grad,
                 device.name() + " g^T x");
    if (strided_template(device)) {
      EXPECT_EQ(linear_fn.stats().program.kernels, 1) << device.name();
      // On a software Vulkan device a transposed A would cost the template its vec4 loads, which
      // measured slower than copying the transpose first: there it stays a copy.
      const bool copies_a = device.name().rfind("vulkan", 0) == 0 && device.backend().caps().is_cpu;
      EXPECT_EQ(grad_fn.stats().program.kernels, copies_a ? 2 : 1) << device.name();
    }
  }
}

// One program for every sequence length (the length turns symbolic after it changes). At 4 the
// matmul is below the Vulkan template's threshold: the group's generic kernel runs, reading the
// permutes through their index maps, still as one kernel.
TEST(CompileViews, WhereTheTemplateDeclinesTheGenericKernelReadsTheViews) {
  const int64_t b = 2, h = 2, d = 32;
  for (const Device& device : devices()) {
    auto fast = compile([](const Tensor& q, const Tensor& k) { return scores(q, k); });
    for (int64_t s : {64, 48, 4}) {
      const std::vector<float> q = values(b * s * h * d, 0.31f, 0.2f), k = values(b * s * h * d, 0.17f, 0.7f);
      const Tensor got = fast(from_vector(q, {b, s, h, d}, device), from_vector(k, {b, s, h, d}, device));
      expect_close(got.to_vector<float>(), scores_by_hand(q, k, b, s, h, d), device.name() + " at length " + std::to_string(s));
      if (strided_template(device)) EXPECT_EQ(fast.stats().program.kernels, 1) << device.name() << " at length " << s;
    }
    EXPECT_EQ(fast.stats().compiles, 2) << device.name();
  }
}

// A view strides cannot express (a reshape merging dims a permute split apart) stays a copy, and
// the product is still right.
TEST(CompileViews, AViewStridesCannotExpressIsCopied) {
  const int64_t a = 4, bb = 16, c = 32, n = 24;
  const std::vector<float> x = values(a * bb * c, 0.13f, 0.3f), w = values(c * n, 0.29f, 1.1f);
  std::vector<double> want;
  for (int64_t i = 0; i < bb; ++i)
    for (int64_t j = 0; j < a; ++j)
      for (int64_t col = 0; col < n; ++col) {
        double acc = 0;
        for (int64_t r = 0; r < c; ++r) acc += double(x[size_t((j * bb + i) * c + r)]) * w[size_t(r * n + col)];
        want.push_back(acc);
      }
  for (const Device& device : devices()) {
    auto fast = compile([](const Tensor& t, const Tensor& m) {
      return matmul(reshape(permute(t, {1, 0, 2}), {t.shape(0) * t.shape(1), t.shape(2)}), m);
    });
    expect_close(fast(from_vector(x, {a, bb, c}, device), from_vector(w, {c, n}, device)).to_vector<float>(), want,
                 device.name());
  }
}

}  // namespace
}  // namespace kiln
