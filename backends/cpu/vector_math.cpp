// The cpu device's eager transcendental ops, vectorized: exp, log, sin, cos, tanh, erf, and the
// activations made of them (sigmoid, silu, elu, gelu), on contiguous f32 and f64 tensors; softmax
// and log_softmax over the last dim of f32 tensors.
//  - The reference kernels call the scalar libm function per element: they are the oracle, and
//    their library is built for any x86-64.
//  - Here each loop is compiled three times (target_clones: AVX-512, AVX2 and the baseline), and
//    the loader picks the clone for the CPU it runs on. In each, GCC's vectorizer calls glibc's
//    libmvec variant of the function for that ISA (within 4 ulp), as the generated kernels do
//    (cpu_programs.cpp); -fno-math-errno (backends/CMakeLists.txt) lets it.
//  - Other dtypes, other ops, other compilers and a glibc without libmvec keep the reference
//    kernel.
#include "backends/cpu/vector_math.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "backends/ref/host_memory.h"
#include "backends/ref/parallel.h"
#include "core/ir/shape.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(KILN_HAVE_MVEC)
#define KILN_SIMD __attribute__((simd("notinbranch")))
extern "C" {
float expf(float) noexcept KILN_SIMD; float logf(float) noexcept KILN_SIMD; float tanhf(float) noexcept KILN_SIMD;
float erff(float) noexcept KILN_SIMD; float sinf(float) noexcept KILN_SIMD; float cosf(float) noexcept KILN_SIMD;
double exp(double) noexcept KILN_SIMD; double log(double) noexcept KILN_SIMD; double tanh(double) noexcept KILN_SIMD;
double erf(double) noexcept KILN_SIMD; double sin(double) noexcept KILN_SIMD; double cos(double) noexcept KILN_SIMD;
}
#define KILN_VECTOR_MATH 1
#else
#define KILN_VECTOR_MATH 0
#endif

namespace kiln::cpu {
namespace {

enum class Fn { Exp, Log, Sin, Cos, Tanh, Erf, Sigmoid, Silu, Elu, GeluErf, GeluTanh };

std::optional<Fn> vector_fn(OpKind kind, const AttrMap& attrs) {
  switch (kind) {
    case OpKind::Exp: return Fn::Exp;
    case OpKind::Log: return Fn::Log;
    case OpKind::Sin: return Fn::Sin;
    case OpKind::Cos: return Fn::Cos;
    case OpKind::Tanh: return Fn::Tanh;
    case OpKind::Erf: return Fn::Erf;
    case OpKind::Sigmoid: return Fn::Sigmoid;
    case OpKind::Silu: return Fn::Silu;
    case OpKind::Elu: return Fn::Elu;
    case OpKind::Gelu: return attrs.get_string("approximate") == "tanh" ? Fn::GeluTanh : Fn::GeluErf;
    default: return std::nullopt;
  }
}

// One loop per function, each with the reference kernel's formula (backends/ref/kernels/
// pointwise.cpp), so the two differ only by the vector functions' rounding. The per-dtype
// functions are written out, not a template: GCC clones only plain functions.
#define KILN_MAP_LOOPS(T, EXP, LOG, SIN, COS, TANH, ERF)                                                  \
  switch (fn) {                                                                                          \
    case Fn::Exp: for (int64_t i = 0; i < n; ++i) out[i] = EXP(in[i]); break;                           \
    case Fn::Log: for (int64_t i = 0; i < n; ++i) out[i] = LOG(in[i]); break;                           \
    case Fn::Sin: for (int64_t i = 0; i < n; ++i) out[i] = SIN(in[i]); break;                           \
    case Fn::Cos: for (int64_t i = 0; i < n; ++i) out[i] = COS(in[i]); break;                           \
    case Fn::Tanh: for (int64_t i = 0; i < n; ++i) out[i] = TANH(in[i]); break;                         \
    case Fn::Erf: for (int64_t i = 0; i < n; ++i) out[i] = ERF(in[i]); break;                           \
    case Fn::Sigmoid: for (int64_t i = 0; i < n; ++i) out[i] = T(1) / (T(1) + EXP(-in[i])); break;      \
    case Fn::Silu: for (int64_t i = 0; i < n; ++i) out[i] = in[i] / (T(1) + EXP(-in[i])); break;        \
    case Fn::Elu:                                                                                        \
      for (int64_t i = 0; i < n; ++i) {                                                                  \
        const T v = in[i], e = EXP(v);                                                                   \
        out[i] = v > T(0) ? v : T(alpha * (e - T(1)));                                                   \
      }                                                                                                  \
      break;                                                                                             \
    case Fn::GeluErf:                                                                                    \
      for (int64_t i = 0; i < n; ++i) out[i] = T(0.5) * in[i] * (T(1) + ERF(in[i] * T(0.7071067811865476))); \
      break;                                                                                             \
    case Fn::GeluTanh:                                                                                   \
      for (int64_t i = 0; i < n; ++i) {                                                                  \
        const T v = in[i];                                                                               \
        out[i] = T(0.5) * v * (T(1) + TANH(T(0.7978845608028654) * (v + T(0.044715) * v * v * v)));     \
      }                                                                                                  \
      break;                                                                                             \
  }

KILN_CPU_CLONES void map_f32(Fn fn, double alpha, const float* __restrict in, float* __restrict out, int64_t n) {
  KILN_MAP_LOOPS(float, expf, logf, sinf, cosf, tanhf, erff)
}

KILN_CPU_CLONES void map_f64(Fn fn, double alpha, const double* __restrict in, double* __restrict out, int64_t n) {
  KILN_MAP_LOOPS(double, exp, log, sin, cos, tanh, erf)
}

#undef KILN_MAP_LOOPS

// Softmax (or log_softmax) of `rows` rows of n floats each, in f32 with the reference's steps:
// the max, exp(x - max) and its sum, then a scale (or x - max - log(sum)). A NaN anywhere in a
// row makes the sum NaN, and so the whole row, as in the reference and PyTorch. The sum adds 16
// partial sums, which vectorize and keep a long row's rounding error small.
KILN_CPU_CLONES void softmax_rows_f32(bool log_form, const float* __restrict in, float* __restrict out,
                                      int64_t rows, int64_t n) {
  constexpr int kParts = 16;
  for (int64_t row = 0; row < rows; ++row) {
    const float* x = in + row * n;
    float* y = out + row * n;
    float max = -__builtin_inff();
    for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
    for (int64_t i = 0; i < n; ++i) y[i] = expf(x[i] - max);
    float parts[kParts] = {};
    int64_t i = 0;
    for (; i + kParts <= n; i += kParts)
      for (int k = 0; k < kParts; ++k) parts[k] += y[i + k];
    for (; i < n; ++i) parts[0] += y[i];
    float sum = 0;
    for (int k = 0; k < kParts; ++k) sum += parts[k];
    if (log_form) {
      const float log_sum = logf(sum);
      for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - max) - log_sum;
    } else {
      for (int64_t j = 0; j < n; ++j) y[j] = y[j] / sum;
    }
  }
}

bool run_softmax(const OpRun& run, const BufferView& x, void* in, void* out) {
  if (x.dtype != DType::F32 || x.dims.empty()) return false;
  const int64_t rank = int64_t(x.dims.size());
  int64_t dim = run.attrs.get_int("dim");
  if (dim < 0) dim += rank;
  if (dim != rank - 1) return false;
  const int64_t n = x.dims.back();
  const int64_t rows = numel(std::span(x.dims).first(size_t(rank - 1)));
  if (n == 0 || rows == 0) return true;
  const bool log_form = run.kind == OpKind::LogSoftmax;
  reference::parallel_for(rows, std::max<int64_t>(1, reference::kParallelGrain / n), [&](int64_t begin, int64_t end) {
    softmax_rows_f32(log_form, static_cast<const float*>(in) + begin * n, static_cast<float*>(out) + begin * n,
                     end - begin, n);
  });
  return true;
}

}  // namespace

bool run_vector_math(const OpRun& run) {
  if (!KILN_VECTOR_MATH) return false;
  // The op kind first: every eager op on the device asks.
  const bool softmax = run.kind == OpKind::Softmax || run.kind == OpKind::LogSoftmax;
  const std::optional<Fn> fn = vector_fn(run.kind, run.attrs);
  if (!fn && !softmax) return false;
  if (run.inputs.size() != 1 || run.outputs.size() != 1) return false;
  const BufferView& x = run.inputs[0];
  const BufferView& y = run.outputs[0];
  if (!x.row_major() || x.offset != 0 || x.dtype != y.dtype || x.dims != y.dims) return false;
  if (x.dtype != DType::F32 && x.dtype != DType::F64) return false;
  void* in = reference::host_data(*x.buffer);
  void* out = reference::host_data(*y.buffer);
  if (in == out) return false;  // the loops' pointers are restrict: a planned in-place op keeps the reference
  if (softmax) return run_softmax(run, x, in, out);
  const double alpha = *fn == Fn::Elu ? run.attrs.get_float("alpha") : 0.0;
  const int64_t n = numel(x.dims);
  reference::parallel_for(n, reference::kParallelGrain, [&](int64_t begin, int64_t end) {
    if (x.dtype == DType::F32)
      map_f32(*fn, alpha, static_cast<const float*>(in) + begin, static_cast<float*>(out) + begin, end - begin);
    else
      map_f64(*fn, alpha, static_cast<const double*>(in) + begin, static_cast<double*>(out) + begin, end - begin);
  });
  return true;
}

}  // namespace kiln::cpu
