// Helper functions generated kernels call, shared by both dialects: GLSL lacks erf and leaves
// pow/max/mod edge cases undefined, so kiln defines them to match the cpu reference. Each definition
// starts with KILN_FN (empty in GLSL, "__device__ inline" in CUDA); the CUDA compat block defines the
// GLSL builtins the shared text uses.
#include "core/kernel/emit_prelude.h"

namespace kiln::kernel {

const char* prelude_macros(Dialect dialect) {
  switch (dialect) {
    case Dialect::Cpp: return "#define KILN_FN static inline\n#define KILN_PRECISE\n";
    case Dialect::Cuda: return "#define KILN_FN __device__ inline\n#define KILN_PRECISE\n";
    case Dialect::Glsl: break;
  }
  return "#define KILN_FN\n#define KILN_PRECISE precise\n";
}

// Float helpers write their literals with an f suffix: in CUDA C and C++ an unsuffixed 2.0 is a
// double and would take the whole expression (exp, the division) to double precision.
const char* prelude_common() {
  return R"(KILN_FN float kiln_inf() { return uintBitsToFloat(0x7f800000u); }
KILN_FN float kiln_nan() { return uintBitsToFloat(0x7fc00000u); }
KILN_FN float kiln_erf(float x) {  // Abramowitz-Stegun 7.1.26, |error| < 1.5e-7
  float s = sign(x), a = abs(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t * exp(-a * a);
  return s * y;
}
KILN_FN float kiln_tanh(float x) { float e = exp(-2.0f * abs(x)); return sign(x) * (1.0f - e) / (1.0f + e); }
KILN_FN float kiln_pow(float a, float b) {
  if (b == 0.0f) return 1.0f;
  if (a < 0.0f && b == floor(b)) { float m = pow(-a, b); return mod(b, 2.0f) == 0.0f ? m : -m; }
  return pow(a, b);
}
KILN_FN uint kiln_pow(uint a, uint b) { uint r = 1u; while (b > 0u) { if ((b & 1u) != 0u) r *= a; a *= a; b >>= 1u; } return r; }
KILN_FN int kiln_pow(int a, int b) { if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0); int r = 1; while (b > 0) { if ((b & 1) != 0) r *= a; a *= a; b >>= 1; } return r; }
// a / b rounded as IEEE division (the reference, ONNX): Vulkan lets f32 division be 2.5 ulp off,
// which moves round() and floor() of a quotient across an integer. One residual step (exact with
// an fma, which `precise` keeps the driver from splitting) corrects it; zero, infinite and NaN
// quotients pass through.
KILN_FN float kiln_div(float a, float b) {
  KILN_PRECISE float q = a / b;
  KILN_PRECISE float c = q + fma(-q, b, a) / b;
  return (isinf(q) || isnan(c)) ? q : c;
}
KILN_FN float kiln_max(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : max(a, b); }
KILN_FN float kiln_min(float a, float b) { return (isnan(a) || isnan(b)) ? a + b : min(a, b); }
KILN_FN int kiln_max(int a, int b) { return max(a, b); }
KILN_FN int kiln_min(int a, int b) { return min(a, b); }
KILN_FN uint kiln_max(uint a, uint b) { return max(a, b); }
KILN_FN uint kiln_min(uint a, uint b) { return min(a, b); }
KILN_FN float kiln_rem(float a, float b, bool c_fmod) { float r = a - b * trunc(a / b); if (!c_fmod && r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b; return r; }
KILN_FN int kiln_rem(int a, int b, bool c_fmod) { int r = a - (a / b) * b; if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
KILN_FN uint kiln_rem(uint a, uint b, bool c_fmod) { return a % b; }
)";
}

const char* prelude_f64() {
  return R"(KILN_FN double kiln_erf(double x) { return double(kiln_erf(float(x))); }
KILN_FN double kiln_tanh(double x) { return double(kiln_tanh(float(x))); }
KILN_FN double kiln_pow(double a, double b) { return double(kiln_pow(float(a), float(b))); }
KILN_FN double kiln_max(double a, double b) { return (isnan(a) || isnan(b)) ? a + b : max(a, b); }
KILN_FN double kiln_min(double a, double b) { return (isnan(a) || isnan(b)) ? a + b : min(a, b); }
KILN_FN double kiln_rem(double a, double b, bool c_fmod) { double r = a - b * trunc(a / b); if (!c_fmod && r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b; return r; }
)";
}

const char* prelude_bf16() {
  return R"(KILN_FN uint16_t kiln_to_bf16(float v) {
  uint u = floatBitsToUint(v);
  if (isnan(v)) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
)";
}

const char* prelude_i64() {
  return R"(KILN_FN int64_t kiln_max(int64_t a, int64_t b) { return max(a, b); }
KILN_FN int64_t kiln_min(int64_t a, int64_t b) { return min(a, b); }
KILN_FN int64_t kiln_rem(int64_t a, int64_t b, bool c_fmod) { int64_t r = a - (a / b) * b; if (!c_fmod && r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
KILN_FN int64_t kiln_pow(int64_t a, int64_t b) { if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0); int64_t r = 1; while (b > 0) { if ((b & 1) != 0) r *= a; a *= a; b >>= 1; } return r; }
)";
}

const char* prelude_u64() {
  return R"(KILN_FN uint64_t kiln_max(uint64_t a, uint64_t b) { return max(a, b); }
KILN_FN uint64_t kiln_min(uint64_t a, uint64_t b) { return min(a, b); }
KILN_FN uint64_t kiln_rem(uint64_t a, uint64_t b, bool c_fmod) { return a % b; }
KILN_FN uint64_t kiln_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ul;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ul;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebul;
  return x ^ (x >> 31);
}
KILN_FN float kiln_uniform(uint64_t seed, uint64_t i, bool mix) {  // as core/support/random.h
  if (mix) seed = kiln_splitmix64(seed);
  uint64_t bits = kiln_splitmix64(seed * 0x632be59bd9b4e019ul + kiln_splitmix64(i));
  return float(uint(bits >> 41) * 2u + 1u) * 5.9604644775390625e-8f;
}
KILN_FN uint64_t kiln_pow(uint64_t a, uint64_t b) { uint64_t r = uint64_t(1); while (b > uint64_t(0)) { if ((b & uint64_t(1)) != uint64_t(0)) r *= a; a *= a; b >>= 1; } return r; }
)";
}

const char* prelude_cuda_compat() {
  return R"(typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned int uint;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef signed char int8_t;
typedef unsigned char uint8_t;
__device__ inline float uintBitsToFloat(uint u) { return __uint_as_float(u); }
__device__ inline uint floatBitsToUint(float f) { return __float_as_uint(f); }
__device__ inline float sign(float x) { return float((x > 0.0f) - (x < 0.0f)); }
__device__ inline double sign(double x) { return double((x > 0.0) - (x < 0.0)); }
__device__ inline int sign(int x) { return (x > 0) - (x < 0); }
__device__ inline int64_t sign(int64_t x) { return int64_t((x > 0) - (x < 0)); }
__device__ inline float roundEven(float x) { return rintf(x); }
__device__ inline double roundEven(double x) { return rint(x); }
__device__ inline float mod(float a, float b) { return a - b * floorf(a / b); }
template <class T> __device__ inline T clamp(T x, double lo, double hi) { return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x); }
)";
}

const char* prelude_cpp_compat() {
  return R"(typedef unsigned int uint;
using std::abs; using std::exp; using std::log; using std::sqrt; using std::sin; using std::cos;
using std::floor; using std::ceil; using std::trunc; using std::pow; using std::isnan; using std::isinf;
using std::fma;
static inline float uintBitsToFloat(uint u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint floatBitsToUint(float f) { uint u; std::memcpy(&u, &f, 4); return u; }
template <class T> static inline T max(T a, T b) { return a > b ? a : b; }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }
template <class T> static inline T sign(T x) { return T((x > T(0)) - (x < T(0))); }
static inline float roundEven(float x) { return std::nearbyint(x); }
static inline double roundEven(double x) { return std::nearbyint(x); }
static inline float mod(float a, float b) { return a - b * std::floor(a / b); }
template <class T> static inline T clamp(T x, double lo, double hi) { return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x); }
)";
}

}  // namespace kiln::kernel
