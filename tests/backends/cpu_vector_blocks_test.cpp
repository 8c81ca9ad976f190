// The cpu backend's vector blocks (core/kernel/emit_cpp_vector.h): which kernels get one, and what
// they compute. Oracles: std::exp and std::tanh in double for the block's own exp and tanh (within 1
// ulp of the rounded result over [-110, 95], on every 4099th float bit pattern and at the
// specials: subnormal results, 0 and inf past the ends, NaN);
// the ref interpreter for a chain of every op a block prints, with uniform operands, at sizes that
// leave the scalar loop a tail (tolerance |cpu - ref| <= 2e-6 * (1 + |ref|): the block's exp is
// not libm's; NaN and infinities match exactly).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/trace/bundle.h"

namespace kiln {
namespace {

std::string cpp_source(OpKind op, const std::vector<TensorType>& inputs, DType out_type) {
  kernel::LoweredOp lowered = kernel::lower_op(op, {}, inputs, {{out_type, inputs.at(0).shape}}, 1);
  kernel::EmitOptions o;
  o.dialect = kernel::Dialect::Cpp;
  o.static_params = lowered.steps.at(0).kernel.static_param_values();
  kernel::EmittedKernel k = kernel::emit(lowered.steps.at(0).kernel.kernel, o);
  EXPECT_EQ(k.line_origins.size(), size_t(std::count(k.source.begin(), k.source.end(), '\n')));
  return k.source;
}

TEST(CpuVectorBlocks, FlatFloatKernelsGetABlockOthersKeepTheScalarLoop) {
  const std::string flat = cpp_source(OpKind::Mul, {{DType::F32, {64, 300}}, {DType::F32, {}}}, DType::F32);
  EXPECT_NE(flat.find("#if KILN_VECTOR_BLOCKS"), std::string::npos) << flat;
  EXPECT_NE(flat.find("begin += KILN_LANES * 8"), std::string::npos) << flat;
  EXPECT_NE(flat.find("for (int gid = int(begin); gid < int(end); ++gid)"), std::string::npos)
      << "the scalar loop takes the tail:\n" << flat;
  // A row broadcast reads coordinates; an integer kernel computes in int.
  const std::string rows = cpp_source(OpKind::Add, {{DType::F32, {64, 300}}, {DType::F32, {300}}}, DType::F32);
  EXPECT_EQ(rows.find("KILN_VECTOR_BLOCKS"), std::string::npos) << rows;
  const std::string ints = cpp_source(OpKind::Mul, {{DType::I32, {64, 300}}, {DType::I32, {}}}, DType::I32);
  EXPECT_EQ(ints.find("KILN_VECTOR_BLOCKS"), std::string::npos) << ints;
}

int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? -int64_t(i & 0x7fffffff) : int64_t(i);
}

template <class F>
bool compiled_with_a_block(const F& f) {
  for (const trace::BundleKernel& k : f.bundle().kernels)
    for (const trace::KernelSource& s : k.sources)
      if (s.dialect == "cpp" && s.text.find("#if KILN_VECTOR_BLOCKS") != std::string::npos) return true;
  return false;
}

// Within `ulps` of the correctly rounded f(x) for every x; NaN where that is NaN.
void expect_within_ulps(const std::vector<float>& x, const std::vector<float>& got, double (*f)(double),
                        const char* name, int ulps) {
  ASSERT_EQ(got.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = float(f(double(x[i])));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << name << "(" << x[i] << ") = " << got[i];
      continue;
    }
    EXPECT_LE(std::abs(ordered(got[i]) - ordered(want)), ulps)
        << name << "(" << x[i] << ") = " << got[i] << ", not " << want;
  }
}

TEST(CpuVectorBlocks, ExpAndTanhAreWithinOneUlpOverEveryFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.4f, -103.0f, -103.9f, -104.5f,
                          -150.0f, 200.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i <= 50000; ++i) x.push_back(-110.0f + 205.0f * float(i) / 50000.0f);
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) {  // every 4099th float bit pattern
    const uint32_t b = uint32_t(bits);
    float v;
    std::memcpy(&v, &b, sizeof v);
    x.push_back(v);
  }
  auto f = compile([](const Tensor& t) { return exp(t); }, CompileOptions{.name = "block_exp"});
  expect_within_ulps(x, f(from_vector(x, Device::cpu())).to_vector<float>(), std::exp, "exp", 1);
  EXPECT_TRUE(compiled_with_a_block(f));
  for (int i = 0; i < 20000; ++i) x.push_back(float(i - 10000) * 1e-4f);  // the polynomial's side
  auto g = compile([](const Tensor& t) { return tanh(t); }, CompileOptions{.name = "block_tanh"});
  expect_within_ulps(x, g(from_vector(x, Device::cpu())).to_vector<float>(), std::tanh, "tanh", 1);
  EXPECT_TRUE(compiled_with_a_block(g));
}

Tensor every_block_op(const Tensor& x, const Tensor& s) {
  Tensor y = abs(x * s - 0.25) / (s + 1.0);
  y = sigmoid(y) + silu(-x) + relu(x) - leaky_relu(x, 0.1) + elu(x * 0.5, 0.7);
  y = maximum(y, x) + minimum(-y, s) * exp(-abs(x));
  y = where(gt(x, s), y, tanh(x)) + cast(le(y, x), DType::F32) * gelu(x, "tanh");
  return reciprocal(y + 3.0) + sqrt(abs(y)) - rsqrt(abs(x) + 1.0);
}

TEST(CpuVectorBlocks, EveryOpABlockPrintsMatchesTheReferenceWithTails) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {int64_t(5), int64_t(128), int64_t(1000), int64_t(40003)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x;
    for (int64_t i = 0; i < n; ++i) x.push_back(float(double((i * 37) % 2001) - 1000.0) / 60.0f);
    for (size_t i = 0; i < x.size(); i += 97) x[i] = i % 3 == 0 ? nan : (i % 3 == 1 ? inf : -inf);
    const std::vector<float> scale = {0.75f};
    auto f = compile(every_block_op, CompileOptions{.name = "every_block_op"});
    const std::vector<double> got =
        f(from_vector(x, Device::cpu()), from_vector(scale, Device::cpu())).to_vector<double>();
    if (n >= 128) EXPECT_TRUE(compiled_with_a_block(f));
    const std::vector<double> want =
        every_block_op(from_vector(x, Device::ref()), from_vector(scale, Device::ref())).to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i]) || std::isinf(want[i])) {
        EXPECT_TRUE(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]) << i << ": " << got[i] << " vs " << want[i];
        continue;
      }
      EXPECT_LE(std::abs(got[i] - want[i]), 2e-6 * (1 + std::abs(want[i]))) << i << ": x " << x[i];
    }
  }
}

}  // namespace
}  // namespace kiln
