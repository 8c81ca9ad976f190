// The cpu backend's small matmuls (backends/cpu/small_matmul.h): which ops take kiln's own loops,
// and what they compute with their epilogues. Oracle: the product and the steps in double, written
// out here; tolerance |got - want| <= 1e-5 * (1 + |want|) (sums of at most 1280 f32 products of
// values below 1 in magnitude, in another order than the double sum). A compiled layer against the
// ref interpreter: 1e-4 (sums of 32 to 64 products of N(0, 1) values).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <kiln/kiln.h>

#include "backends/cpu/small_matmul.h"
#include "backends/matmul_problem.h"

namespace kiln::cpu {
namespace {

std::vector<float> values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(std::sin(double(i) * 0.37 + seed) * 0.9);
  return v;
}

BufferView view(std::vector<int64_t> dims) { return BufferView{nullptr, DType::F32, std::move(dims)}; }

TEST(CpuSmallMatmul, RowsTimesAMatrixWithEveryEpilogueStepMatchTheProductInDouble) {
  const int64_t k = 37, n = 200;  // 3 blocks of 64 columns and 8 more
  const AttrMap none;
  for (int64_t m = 1; m <= kSmallMatmulRows; ++m) {
    SCOPED_TRACE("m=" + std::to_string(m));
    std::vector<float> a = values(size_t(m * k), 1), b = values(size_t(k * n), 2), full = values(size_t(m * n), 3),
                       column = values(size_t(n), 4), scalar = {0.25f};
    std::vector<float> out(static_cast<size_t>(m * n));
    column[5] = std::nanf("");  // maximum gives NaN where either side is NaN
    // relu(maximum(scalar - (a x b + full) * column, column)); each step's operand an input of its
    // own, after a and b
    const std::vector<EpilogueStep> epilogue = {{OpKind::Add, &none, 2, false},
                                                {OpKind::Mul, &none, 3, false},
                                                {OpKind::Sub, &none, 4, true},
                                                {OpKind::Maximum, &none, 5, false},
                                                {OpKind::Relu, &none, -1, false}};
    const std::vector<BufferView> ins = {view({m, k}), view({k, n}), view({m, n}), view({n}), view({1, 1}), view({n})};
    const std::vector<BufferView> outs = {view({m, n})};
    std::unique_ptr<HostKernel> kernel = make_small_matmul(OpRun{OpKind::MatMul, {}, ins, outs}, epilogue);
    ASSERT_TRUE(kernel);
    kernel->run({{a.data()}, {b.data()}, {full.data()}, {column.data()}, {scalar.data()}, {column.data()}, {out.data()}});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t kk = 0; kk < k; ++kk) want += double(a[size_t(i * k + kk)]) * double(b[size_t(kk * n + j)]);
        want = 0.25 - (want + full[size_t(i * n + j)]) * column[size_t(j)];
        want = std::isnan(want) || std::isnan(column[size_t(j)]) ? NAN : std::max(want, double(column[size_t(j)]));
        want = want > 0 ? want : 0;  // relu of NaN is 0, as the reference's
        const double got = out[size_t(i * n + j)];
        EXPECT_LE(std::abs(got - want), 1e-5 * (1 + std::abs(want))) << i << ", " << j;
      }
  }
}

// Small (33 outputs of 70 products: 4 lanes of 16 and a tail of 6) and large, past
// kSmallMatmulFlops (a classifier's 1000 outputs of 1280, split over the threads).
TEST(CpuSmallMatmul, ARowTimesATransposedWeightWithBiasMatchesTheDotProducts) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{70, 33}, {1280, 1000}}) {
    SCOPED_TRACE("k=" + std::to_string(k) + " n=" + std::to_string(n));
    std::vector<float> x = values(size_t(k), 5), w = values(size_t(n * k), 6), bias = values(size_t(n), 7);
    std::vector<float> out(static_cast<size_t>(n));
    const std::vector<BufferView> ins = {view({1, k}), view({n, k}), view({n})}, outs = {view({1, n})};
    std::unique_ptr<HostKernel> kernel = make_small_matmul(OpRun{OpKind::Linear, {}, ins, outs}, {});
    ASSERT_TRUE(kernel);
    kernel->run({{x.data()}, {w.data()}, {bias.data()}, {out.data()}});
    for (int64_t j = 0; j < n; ++j) {
      double want = bias[size_t(j)];
      for (int64_t kk = 0; kk < k; ++kk) want += double(x[size_t(kk)]) * double(w[size_t(j * k + kk)]);
      EXPECT_LE(std::abs(out[size_t(j)] - want), 1e-5 * (1 + std::abs(want))) << j;
    }
  }
}

TEST(CpuSmallMatmul, LargerOrOtherMatmulsAndStepsStayWithOneDnn) {
  const AttrMap none;
  auto takes = [](std::vector<BufferView> ins, std::vector<int64_t> out, std::vector<EpilogueStep> epilogue = {},
                  OpKind kind = OpKind::MatMul) {
    const std::vector<BufferView> outs = {view(std::move(out))};
    return make_small_matmul(OpRun{kind, {}, ins, outs}, epilogue) != nullptr;
  };
  EXPECT_TRUE(takes({view({4, 64}), view({64, 256})}, {4, 256}));
  EXPECT_FALSE(takes({view({5, 64}), view({64, 256})}, {5, 256})) << "more rows than kSmallMatmulRows";
  EXPECT_FALSE(takes({view({1, 512}), view({512, 512})}, {1, 512})) << "past kSmallMatmulFlops";
  EXPECT_FALSE(takes({view({2, 1, 64}), view({2, 64, 64})}, {2, 1, 64})) << "batched";
  EXPECT_FALSE(takes({view({2, 64}), view({64, 64})}, {2, 64}, {}, OpKind::Linear)) << "two rows by a transposed weight";
  EXPECT_FALSE(takes({view({1, 64}), view({64, 64})}, {1, 64}, {{OpKind::Sigmoid, &none, -1, false}}))
      << "sigmoid is oneDNN's post-op";
  EXPECT_FALSE(takes({view({1, 64}), view({64, 64}), view({64, 1})}, {1, 64}, {{OpKind::Add, &none, 2, false}}))
      << "an operand along the rows";
  BufferView f64 = view({1, 64});
  f64.dtype = DType::F64;
  EXPECT_FALSE(takes({f64, view({64, 64})}, {1, 64}));
}

// A batch-1 layer compiled on cpu, its matmul and epilogue one small-matmul host op, against the
// ref interpreter.
TEST(CpuSmallMatmul, ACompiledBatchOneLayerMatchesTheReference) {
  auto layer = [](const Tensor& x, const Tensor& w, const Tensor& v, const Tensor& b) {
    return relu(matmul(x, w) + b) - linear(x, v, b);
  };
  Tensor x = randn({1, 64}, Device::ref(), 1), w = randn({64, 96}, Device::ref(), 2),
         v = randn({96, 64}, Device::ref(), 3), b = randn({96}, Device::ref(), 4);
  auto compiled = compile(layer, CompileOptions{.name = "batch_one_layer"});
  const std::vector<double> got =
      compiled(x.to(Device::cpu()), w.to(Device::cpu()), v.to(Device::cpu()), b.to(Device::cpu())).to_vector<double>();
  const std::vector<double> want = layer(x, w, v, b).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::abs(got[i] - want[i]), 1e-4 * (1 + std::abs(want[i]))) << i;
}

// An RNN step's product plus its slice of the input projection: on cpu the slice is the template's
// epilogue operand read in place from its offset (one kernel, no copy of the slice); Vulkan's
// templates bind operands from their buffer's start and keep the copy. Both against ref.
TEST(CpuSmallMatmul, AnEpilogueOperandSlicedFromAProjectionIsReadInPlace) {
  auto step = [](const Tensor& h, const Tensor& w, const Tensor& projection) {
    return matmul(h, w) + reshape(slice(projection, 0, 2, 3), {1, 96});
  };
  Tensor h = randn({1, 64}, Device::ref(), 1), w = randn({64, 96}, Device::ref(), 2),
         projection = randn({5, 1, 96}, Device::ref(), 3);
  const std::vector<double> want = step(h, w, projection).to_vector<double>();
  std::vector<Device> devices = {Device::cpu()};
  for (const DeviceEntry& e : available_devices())
    if (e.kind == BackendKind::Vulkan) devices.push_back(Device(e.kind, e.index));
  for (const Device& d : devices) {
    SCOPED_TRACE(d.name());
    auto compiled = compile(step, CompileOptions{.name = "rnn_step"});
    const std::vector<double> got = compiled(h.to(d), w.to(d), projection.to(d)).to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::abs(got[i] - want[i]), 1e-4 * (1 + std::abs(want[i]))) << i;
    if (d == Device::cpu()) EXPECT_EQ(compiled.stats().program.kernels, 1) << "the slice is not copied";
  }
}

// A batch of rows times one weight (a sequence's input projection) is one GEMM of batch x m rows
// where A's rows lie evenly apart; otherwise the batch stays.
TEST(CpuSmallMatmul, ABatchTimesOneWeightFoldsIntoRows) {
  auto problem = [](BufferView a, BufferView b, std::vector<int64_t> out) {
    const std::vector<BufferView> ins = {std::move(a), std::move(b)}, outs = {view(std::move(out))};
    return decode_matmul(OpRun{OpKind::MatMul, {}, ins, outs}).value();
  };
  BufferView sequence = view({16, 1, 32});  // [1, 16, 32] batch-first, permuted to time-first
  sequence.strides = {32, 512, 1};
  MatmulProblem p = problem(sequence, view({32, 256}), {16, 1, 256});
  ASSERT_TRUE(fold_batch_into_rows(p));
  EXPECT_EQ(p.m, 16);
  EXPECT_EQ(p.lda, 32);
  EXPECT_EQ(p.batch(), 1);
  p = problem(view({2, 4, 3, 32}), view({32, 64}), {2, 4, 3, 64});
  ASSERT_TRUE(fold_batch_into_rows(p));
  EXPECT_EQ(p.m, 24);
  EXPECT_EQ(p.lda, 32);
  BufferView gaps = view({4, 3, 32});  // each batch's 3 rows, then a gap
  gaps.strides = {128, 32, 1};
  p = problem(gaps, view({32, 64}), {4, 3, 64});
  EXPECT_FALSE(fold_batch_into_rows(p)) << "rows not evenly apart";
  p = problem(view({4, 3, 32}), view({4, 32, 64}), {4, 3, 64});
  EXPECT_FALSE(fold_batch_into_rows(p)) << "a weight per batch";
  EXPECT_EQ(p.batch(), 4);
}

// The folded products, compiled: a time-first view of a batch-first sequence times a weight, plus a
// bias and a residual of the result's shape (its element index is the same folded or not), on cpu
// (oneDNN's GEMM at 64 and 16 steps, the small matmul at 3) and on Vulkan (its template from 64
// steps, past matmul_min_flops), against ref.
TEST(CpuSmallMatmul, AFoldedBatchMatchesTheReference) {
  auto projection = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
    return matmul(permute(x, {1, 0, 2}), w) + b + r;
  };
  std::vector<Device> devices = {Device::cpu()};
  for (const DeviceEntry& e : available_devices())
    if (e.kind == BackendKind::Vulkan) devices.push_back(Device(e.kind, e.index));
  for (int64_t steps : {64, 16, 3}) {
    Tensor x = randn({1, steps, 32}, Device::ref(), 1), w = randn({32, 256}, Device::ref(), 2),
           b = randn({256}, Device::ref(), 3), r = randn({steps, 1, 256}, Device::ref(), 4);
    const std::vector<double> want = projection(x, w, b, r).to_vector<double>();
    for (const Device& d : devices) {
      SCOPED_TRACE("steps=" + std::to_string(steps) + " on " + d.name());
      auto compiled = compile(projection, CompileOptions{.name = "projection"});
      const std::vector<double> got = compiled(x.to(d), w.to(d), b.to(d), r.to(d)).to_vector<double>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::abs(got[i] - want[i]), 1e-4 * (1 + std::abs(want[i]))) << i;
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
