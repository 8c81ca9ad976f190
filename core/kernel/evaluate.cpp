// Host evaluation of kernel IR with the GLSL printer's semantics (see emit.cpp): values live in the
// printer's compute types (float for 16-bit floats, double, int, int64, uint for u8, bool) and are
// converted on load and store exactly as the generated code converts them.
#include "core/kernel/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "core/support/error.h"
#include "core/support/random.h"

namespace kiln::kernel {


namespace {

// The printer's compute types (emit.cpp compute_type).
enum class Ck : uint8_t { F32, F64, I32, I64, U32, U64, Bool };

Ck compute_of(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return Ck::F32;
    case DType::F64: return Ck::F64;
    case DType::I8: case DType::I16: case DType::I32: return Ck::I32;
    case DType::I64: return Ck::I64;
    case DType::U8: case DType::U16: case DType::U32: return Ck::U32;
    case DType::U64: return Ck::U64;
    case DType::Bool: return Ck::Bool;
  }
  return Ck::F32;
}

struct Val {
  Ck k = Ck::F32;
  union {
    float f;
    double d;
    int32_t i;
    int64_t l;
    uint32_t u;
    uint64_t ul;
    bool b;
  };
  Val() : l(0) {}
};

template <class T> Ck ck_of() {
  if constexpr (std::is_same_v<T, float>) return Ck::F32;
  else if constexpr (std::is_same_v<T, double>) return Ck::F64;
  else if constexpr (std::is_same_v<T, int32_t>) return Ck::I32;
  else if constexpr (std::is_same_v<T, int64_t>) return Ck::I64;
  else if constexpr (std::is_same_v<T, uint32_t>) return Ck::U32;
  else if constexpr (std::is_same_v<T, uint64_t>) return Ck::U64;
  else return Ck::Bool;
}

template <class T> Val make(T x) {
  Val v;
  v.k = ck_of<T>();
  if constexpr (std::is_same_v<T, float>) v.f = x;
  else if constexpr (std::is_same_v<T, double>) v.d = x;
  else if constexpr (std::is_same_v<T, int32_t>) v.i = x;
  else if constexpr (std::is_same_v<T, int64_t>) v.l = x;
  else if constexpr (std::is_same_v<T, uint32_t>) v.u = x;
  else if constexpr (std::is_same_v<T, uint64_t>) v.ul = x;
  else v.b = x;
  return v;
}

// A GLSL constructor conversion T(x). Float -> integer is undefined out of range in GLSL and C++;
// it is pinned like convert_elements does (NaN -> 0, saturate) so results are deterministic.
template <class T, class S> T convert_scalar(S x) {
  if constexpr (std::is_same_v<T, bool>) {
    return x != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return x ? T(1) : T(0);
  } else if constexpr (std::is_integral_v<T> && std::is_floating_point_v<S>) {
    if (std::isnan(x)) return T(0);
    if (x >= S(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (x <= S(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    return T(x);
  } else {
    return T(x);
  }
}

template <class T> T get(const Val& v) {
  switch (v.k) {
    case Ck::F32: return convert_scalar<T>(v.f);
    case Ck::F64: return convert_scalar<T>(v.d);
    case Ck::I32: return convert_scalar<T>(v.i);
    case Ck::I64: return convert_scalar<T>(v.l);
    case Ck::U32: return convert_scalar<T>(v.u);
    case Ck::U64: return convert_scalar<T>(v.ul);
    case Ck::Bool: return convert_scalar<T>(v.b);
  }
  return T();
}

Val convert(const Val& v, Ck to) {
  switch (to) {
    case Ck::F32: return make(get<float>(v));
    case Ck::F64: return make(get<double>(v));
    case Ck::I32: return make(get<int32_t>(v));
    case Ck::I64: return make(get<int64_t>(v));
    case Ck::U32: return make(get<uint32_t>(v));
    case Ck::U64: return make(get<uint64_t>(v));
    case Ck::Bool: return make(get<bool>(v));
  }
  return v;
}

// An op's result in an 8- or 16-bit integer type wraps to that type (op_expression).
Val wrap_narrow(const Val& v, DType t) {
  switch (t) {
    case DType::I8: return make(int32_t(int8_t(get<int32_t>(v))));
    case DType::I16: return make(int32_t(int16_t(get<int32_t>(v))));
    case DType::U8: return make(uint32_t(uint8_t(get<uint32_t>(v))));
    case DType::U16: return make(uint32_t(uint16_t(get<uint32_t>(v))));
    default: return v;
  }
}

// literal(): the printer writes float(value), double(value), an integer truncated through
// long long, or true/false.
Val literal(double value, DType t) {
  switch (compute_of(t)) {
    case Ck::F32: return make(float(value));
    case Ck::F64: return make(value);
    case Ck::I32: return make(int32_t(static_cast<long long>(value)));
    case Ck::I64: return make(int64_t(static_cast<long long>(value)));
    case Ck::U32: return make(uint32_t(static_cast<long long>(value)));
    case Ck::U64:
      return make(value < 0 ? uint64_t(static_cast<long long>(value))
                  : value >= 18446744073709551615.0 ? ~uint64_t(0) : uint64_t(value));
    case Ck::Bool: return make(value != 0);
  }
  return make(float(value));
}

// --- The prelude's helper functions (kGlslPrelude), in float; double versions go through float.

float kiln_erf(float x) {
  float s = x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f), a = std::fabs(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t +
                     0.254829592f) * t * std::exp(-a * a);
  return s * y;
}
float kiln_tanh(float x) {
  float e = std::exp(-2.0f * std::fabs(x));
  float s = x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f);
  return s * (1.0f - e) / (1.0f + e);
}
float glsl_mod(float x, float y) { return x - y * std::floor(x / y); }
float kiln_pow(float a, float b) {
  if (b == 0.0f) return 1.0f;
  if (a < 0.0f && b == std::floor(b)) {
    float m = std::pow(-a, b);
    return glsl_mod(b, 2.0f) == 0.0f ? m : -m;
  }
  return std::pow(a, b);
}
template <class C> C glsl_max(C a, C b) { return a < b ? b : a; }  // GLSL: y if x < y, else x
template <class C> C glsl_min(C a, C b) { return b < a ? b : a; }
template <class C> C kiln_max(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return a + b;
  return glsl_max(a, b);
}
template <class C> C kiln_min(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return a + b;
  return glsl_min(a, b);
}
template <class C> C float_rem(C a, C b, bool c_fmod) {
  C r = a - b * std::trunc(a / b);
  if (!c_fmod && r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
  return r;
}
template <class C> C int_pow(C a, C b) {
  if constexpr (std::is_signed_v<C>) {
    if (b < 0) return a == 1 ? C(1) : (a == -1 ? ((b & 1) != 0 ? C(-1) : C(1)) : C(0));
  }
  using U = std::make_unsigned_t<C>;
  U r = 1, base = U(a);
  while (b > 0) {
    if ((b & 1) != 0) r *= base;
    base *= base;
    b >>= 1;
  }
  return C(r);
}

std::string where_text(const Kernel& k) { return "kernel " + k.name; }

// Math in a floating compute type C (float or double) as op_text prints it.
template <class C> C float_math(const Expr& e, const Val* a, size_t n, const Kernel& k) {
  const C x = get<C>(a[0]);
  const C y = n > 1 ? get<C>(a[1]) : C(0);
  // GLSL has no double transcendentals: the printer computes them in float.
  auto call = [](float (*f)(float), C v) { return C(f(float(v))); };
  auto lit = [&](double v) { return get<C>(literal(v, e.type)); };
  const C one = C(1), zero = C(0);
  switch (e.op) {
    case OpKind::Neg: return -x;
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Exp: return call(std::exp, x);
    case OpKind::Log: return call(std::log, x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return one / std::sqrt(x);
    case OpKind::Sin: return call(std::sin, x);
    case OpKind::Cos: return call(std::cos, x);
    case OpKind::Tanh: return call(kiln_tanh, x);
    case OpKind::Sigmoid: return one / (one + call(std::exp, -x));
    case OpKind::Relu: return x > zero ? x : zero;
    case OpKind::LeakyRelu: return x >= zero ? x : lit(e.attrs.get_float("alpha")) * x;
    case OpKind::Elu: return x > zero ? x : lit(e.attrs.get_float("alpha")) * (call(std::exp, x) - one);
    case OpKind::Gelu:
      if (e.attrs.get_string("approximate") == "tanh")
        return lit(0.5) * x *
               (one + call(kiln_tanh, lit(0.7978845608028654) * (x + lit(0.044715) * x * x * x)));
      return lit(0.5) * x * (one + call(kiln_erf, x * lit(0.7071067811865476)));
    case OpKind::Silu: return x / (one + call(std::exp, -x));
    case OpKind::Erf: return call(kiln_erf, x);
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    case OpKind::Round: return std::nearbyint(x);  // roundEven
    case OpKind::Sign: return x > zero ? one : (x < zero ? -one : zero);
    case OpKind::Reciprocal: return one / x;
    case OpKind::Clip: {
      if (std::isnan(x)) return x;
      double lo = e.attrs.get_float("min"), hi = e.attrs.get_float("max");
      C v = x;
      if (!std::isinf(lo)) v = kiln_max(v, lit(lo));
      if (!std::isinf(hi)) v = kiln_min(v, lit(hi));
      return v;
    }
    case OpKind::Add: return x + y;
    case OpKind::Sub: return x - y;
    case OpKind::Mul: return x * y;
    case OpKind::Div: return x / y;
    case OpKind::Pow: return C(kiln_pow(float(x), float(y)));
    case OpKind::Maximum: return kiln_max(x, y);
    case OpKind::Minimum: return kiln_min(x, y);
    case OpKind::Mod: return float_rem(x, y, e.attrs.has("fmod") && e.attrs.get_bool("fmod"));
    default: break;
  }
  throw Error(where_text(k) + ": op '" + std::string(op_name(e.op)) + "' has no " +
              std::string(dtype_name(e.type)) + " expression form in the printer");
}

// Math in an integer compute type (int, int64, uint): wraps like the GPU's two's complement.
template <class C> C int_math(const Expr& e, const Val* a, size_t n, const Kernel& k) {
  using U = std::make_unsigned_t<C>;
  const C x = get<C>(a[0]);
  const C y = n > 1 ? get<C>(a[1]) : C(0);
  auto lit = [&](double v) { return get<C>(literal(v, e.type)); };
  auto divide_check = [&] {
    if (y == 0)
      throw Error(where_text(k) + ": integer division by zero in '" + std::string(op_name(e.op)) +
                  "' (the reference rejects it; a GPU returns garbage)");
  };
  switch (e.op) {
    case OpKind::Neg: return C(U(0) - U(x));
    case OpKind::Abs:
      if constexpr (std::is_signed_v<C>) return x < 0 ? C(U(0) - U(x)) : x;
      else return x;
    case OpKind::Relu: return x > C(0) ? x : C(0);
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: return x;
    case OpKind::Sign:
      if constexpr (std::is_signed_v<C>) return C((x > 0) - (x < 0));
      else return x > 0u ? C(1) : C(0);
    case OpKind::Clip: {
      double lo = e.attrs.get_float("min"), hi = e.attrs.get_float("max");
      C v = x;
      if (!std::isinf(lo)) v = kiln_max(v, lit(lo));
      if (!std::isinf(hi)) v = kiln_min(v, lit(hi));
      return v;
    }
    case OpKind::Add: return C(U(x) + U(y));
    case OpKind::Sub: return C(U(x) - U(y));
    case OpKind::Mul: return C(U(x) * U(y));
    case OpKind::Div:
      divide_check();
      return x / y;
    case OpKind::Pow: return int_pow(x, y);
    case OpKind::Maximum: return kiln_max(x, y);
    case OpKind::Minimum: return kiln_min(x, y);
    case OpKind::Mod: {
      divide_check();
      if constexpr (!std::is_signed_v<C>) return x % y;  // kiln_rem(uint) ignores c_fmod
      bool c_fmod = e.attrs.has("fmod") && e.attrs.get_bool("fmod");
      C r = x % y;
      if (!c_fmod && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    default: break;
  }
  throw Error(where_text(k) + ": op '" + std::string(op_name(e.op)) + "' has no " +
              std::string(dtype_name(e.type)) + " expression form in the printer");
}

bool is_comparison(OpKind op) {
  return op == OpKind::Eq || op == OpKind::Ne || op == OpKind::Lt || op == OpKind::Le ||
         op == OpKind::Gt || op == OpKind::Ge;
}

template <class C> bool compare(OpKind op, C x, C y) {
  switch (op) {
    case OpKind::Eq: return x == y;
    case OpKind::Ne: return x != y;
    case OpKind::Lt: return x < y;
    case OpKind::Le: return x <= y;
    case OpKind::Gt: return x > y;
    default: return x >= y;
  }
}

// The type GLSL's implicit conversions bring two operands to (int -> uint -> int64 -> float -> double).
Ck common(Ck a, Ck b) {
  auto rank = [](Ck c) {
    switch (c) {
      case Ck::Bool: return 0;
      case Ck::I32: return 1;
      case Ck::U32: return 2;
      case Ck::I64: return 3;
      case Ck::U64: return 4;
      case Ck::F32: return 5;
      case Ck::F64: return 6;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

Val apply_op(const Expr& e, const Val* a, size_t n, const Kernel& k) {
  const Ck out = compute_of(e.type);
  if (e.op == OpKind::Cast) {
    // The printer saturates float -> integer (but i64) to the type's range, NaN to 0.
    if ((a[0].k == Ck::F32 || a[0].k == Ck::F64) && is_integral(e.type) && e.type != DType::I64) {
      double x = get<double>(a[0]);
      return visit_dtype(e.type, [&]<class T>() -> Val {
        if constexpr (std::is_same_v<T, uint64_t>) return make(convert_scalar<T>(x));
        else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) return make(uint32_t(convert_scalar<T>(x)));
        else if constexpr (std::is_integral_v<T>) return make(int32_t(convert_scalar<T>(x)));
        return Val();
      });
    }
    return wrap_narrow(convert(a[0], out), e.type);
  }
  if (e.op == OpKind::Where) return convert(get<bool>(a[0]) ? a[1] : a[2], out);
  if (e.op == OpKind::RandUniform) {
    uint64_t seed = get<uint64_t>(a[0]);
    if (e.attrs.get_bool("mix")) seed = stream_of_counter(seed);
    return make(uniform_f32(seed, get<uint64_t>(a[1])));
  }
  if (is_comparison(e.op)) {
    Ck c = common(a[0].k, a[1].k);
    if (c == Ck::Bool) c = Ck::I32;  // bools compare as 0/1
    switch (c) {
      case Ck::F32: return make(compare(e.op, get<float>(a[0]), get<float>(a[1])));
      case Ck::F64: return make(compare(e.op, get<double>(a[0]), get<double>(a[1])));
      case Ck::I64: return make(compare(e.op, get<int64_t>(a[0]), get<int64_t>(a[1])));
      case Ck::U32: return make(compare(e.op, get<uint32_t>(a[0]), get<uint32_t>(a[1])));
      case Ck::U64: return make(compare(e.op, get<uint64_t>(a[0]), get<uint64_t>(a[1])));
      default: return make(compare(e.op, get<int32_t>(a[0]), get<int32_t>(a[1])));
    }
  }
  switch (e.op) {
    case OpKind::LogicalNot: return make(!get<bool>(a[0]));
    case OpKind::LogicalAnd: return make(get<bool>(a[0]) && get<bool>(a[1]));
    case OpKind::LogicalOr: return make(get<bool>(a[0]) || get<bool>(a[1]));
    case OpKind::LogicalXor: return make(get<bool>(a[0]) != get<bool>(a[1]));
    default: break;
  }
  switch (out) {
    case Ck::F32: return make(float_math<float>(e, a, n, k));
    case Ck::F64: return make(float_math<double>(e, a, n, k));
    case Ck::I32: return wrap_narrow(make(int_math<int32_t>(e, a, n, k)), e.type);
    case Ck::I64: return make(int_math<int64_t>(e, a, n, k));
    case Ck::U32: return wrap_narrow(make(int_math<uint32_t>(e, a, n, k)), e.type);
    case Ck::U64: return make(int_math<uint64_t>(e, a, n, k));
    case Ck::Bool: break;
  }
  // Bool arithmetic is logic, as in the reference.
  const bool x = get<bool>(a[0]), y = n > 1 ? get<bool>(a[1]) : false;
  switch (e.op) {
    case OpKind::Add: case OpKind::Maximum: return make(x || y);
    case OpKind::Mul: case OpKind::Minimum: return make(x && y);
    case OpKind::Sub: return make(x != y);
    case OpKind::Abs: case OpKind::Relu: case OpKind::Sign: case OpKind::Neg:
    case OpKind::Floor: case OpKind::Ceil: case OpKind::Round:
      return make(x);
    default: break;
  }
  throw Error(where_text(k) + ": op '" + std::string(op_name(e.op)) +
              "' has no bool expression form in the printer");
}

// load_text: storage -> compute type.
Val read_element(const HostTensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::F32: { float v; std::memcpy(&v, p + i * 4, 4); return make(v); }
    case DType::F16: { half h; std::memcpy(&h.bits, p + i * 2, 2); return make(float(h)); }
    case DType::BF16: { bfloat16 h; std::memcpy(&h.bits, p + i * 2, 2); return make(float(h)); }
    case DType::F64: { double v; std::memcpy(&v, p + i * 8, 8); return make(v); }
    case DType::I32: { int32_t v; std::memcpy(&v, p + i * 4, 4); return make(v); }
    case DType::I64: { int64_t v; std::memcpy(&v, p + i * 8, 8); return make(v); }
    case DType::U8: return make(uint32_t(p[i]));
    case DType::Bool: return make(p[i] != 0);
    case DType::I8: return make(int32_t(int8_t(p[i])));
    case DType::I16: { int16_t v; std::memcpy(&v, p + i * 2, 2); return make(int32_t(v)); }
    case DType::U16: { uint16_t v; std::memcpy(&v, p + i * 2, 2); return make(uint32_t(v)); }
    case DType::U32: { uint32_t v; std::memcpy(&v, p + i * 4, 4); return make(v); }
    case DType::U64: { uint64_t v; std::memcpy(&v, p + i * 8, 8); return make(v); }
  }
  return Val();
}

// store_text: compute type -> storage (f16 via kiln::half, bf16 round-to-nearest-even, u8 truncates).
void write_element(const HostTensor& t, int64_t i, const Val& value) {
  auto* p = static_cast<uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::F32: { float v = get<float>(value); std::memcpy(p + i * 4, &v, 4); return; }
    case DType::F16: { half h(get<float>(value)); std::memcpy(p + i * 2, &h.bits, 2); return; }
    case DType::BF16: { bfloat16 h(get<float>(value)); std::memcpy(p + i * 2, &h.bits, 2); return; }
    case DType::F64: { double v = get<double>(value); std::memcpy(p + i * 8, &v, 8); return; }
    case DType::I32: { int32_t v = get<int32_t>(value); std::memcpy(p + i * 4, &v, 4); return; }
    case DType::I64: { int64_t v = get<int64_t>(value); std::memcpy(p + i * 8, &v, 8); return; }
    case DType::U8: p[i] = uint8_t(get<uint32_t>(value)); return;
    case DType::Bool: p[i] = get<bool>(value) ? 1 : 0; return;
    case DType::I8: p[i] = uint8_t(int8_t(get<int32_t>(value))); return;
    case DType::I16: { int16_t v = int16_t(get<int32_t>(value)); std::memcpy(p + i * 2, &v, 2); return; }
    case DType::U16: { uint16_t v = uint16_t(get<uint32_t>(value)); std::memcpy(p + i * 2, &v, 2); return; }
    case DType::U32: { uint32_t v = get<uint32_t>(value); std::memcpy(p + i * 4, &v, 4); return; }
    case DType::U64: { uint64_t v = get<uint64_t>(value); std::memcpy(p + i * 8, &v, 8); return; }
  }
}

// A buffer bound to a kernel slot, with the bookkeeping that catches reads of unwritten elements.
struct Binding {
  HostTensor tensor;
  std::string role;                     // "input 0", "output 1", "temp 0"
  std::vector<uint8_t>* written = nullptr;  // null: every element is defined (an input)
};

// One kernel's expression DAG, flattened once so each element evaluates with array memoization.
class KernelRunner {
 public:
  KernelRunner(const LoweredKernel& lk, std::vector<Binding> buffers,
               const std::map<std::string, int64_t>& bindings)
      : lk_(lk), k_(lk.kernel), buffers_(std::move(buffers)), total_(lk.elements(bindings)) {
    params_ = lk.param_values(bindings);
    if (buffers_.size() != k_.buffers.size())
      throw Error(where_text(k_) + ": has " + std::to_string(k_.buffers.size()) +
                  " buffer slots but " + std::to_string(buffers_.size()) + " are bound");
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i].tensor.dtype != k_.buffers[i].dtype)
        throw Error(where_text(k_) + ": slot b" + std::to_string(i) + " is declared " +
                    std::string(dtype_name(k_.buffers[i].dtype)) + " but binds " + buffers_[i].role +
                    " of dtype " + std::string(dtype_name(buffers_[i].tensor.dtype)));
    // One list of stores per segment; a kernel without segments is one segment over all of it.
    std::vector<const std::vector<Store>*> segments{&k_.stores};
    if (!k_.segments.empty()) {
      segments.clear();
      for (const Segment& segment : k_.segments) segments.push_back(&segment.stores);
    }
    for (const std::vector<Store>* stores : segments) {
      stores_.emplace_back();
      for (const Store& s : *stores) add_store(s);
    }
    if (k_.kind == KernelKind::Reduce) {
      if (!k_.extent || !k_.body) throw Error(where_text(k_) + ": Reduce kernel without extent/body");
      extent_ = flatten(k_.extent);
      body_ = flatten(k_.body);
    }
    stamp_.assign(nodes_.size(), 0);
    vals_.resize(nodes_.size());
  }

  void run() {
    const int64_t total = total_;
    coords_.assign(size_t(k_.rank), 0);
    size_t segment = 0;  // a horizontal kernel's segment holding `flat`; its elements count from its start
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t gid = flat;
      if (!k_.segments.empty()) {
        while (segment < k_.segments.size() && flat >= segment_start(segment) + segment_size(segment)) ++segment;
        if (segment == k_.segments.size()) break;
        if (flat < segment_start(segment)) continue;  // between segments
        gid = flat - segment_start(segment);
      }
      gid_ = int32_t(gid);
      int32_t rest = gid_;
      for (int d = k_.rank - 1; d >= 1; --d) {
        coords_[size_t(d)] = rest % params_[size_t(d)];
        rest = rest / params_[size_t(d)];
      }
      if (k_.rank > 0) coords_[0] = rest;
      elem_gen_ = ++gen_;
      have_acc_ = false;
      if (k_.kind == KernelKind::Reduce) reduce();
      for (const auto& [buffer, node] : stores_[segment]) {
        Val v = eval(node);
        const Binding& b = buffers_[size_t(buffer)];
        if (gid >= b.tensor.numel())
          throw Error(where_text(k_) + ": store to b" + std::to_string(buffer) + " (" + b.role +
                      ", " + std::to_string(b.tensor.numel()) + " elements) at element " +
                      std::to_string(gid) + " is out of bounds: the iteration space has " +
                      std::to_string(total) + " elements");
        write_element(b.tensor, gid, convert(v, compute_of(b.tensor.dtype)));
        if (b.written) (*b.written)[size_t(gid)] = 1;
      }
    }
  }

 private:
  struct Node {
    const Expr* expr;
    std::vector<int> args;
    bool loop_variant;  // depends on the reduction counter: recomputed every iteration
  };

  int64_t segment_start(size_t i) const {
    return k_.segments[i].start < 0 ? 0 : params_[size_t(k_.segments[i].start)];
  }
  int64_t segment_size(size_t i) const { return params_[size_t(k_.segments[i].size)]; }

  void add_store(const Store& s) {
    if (s.buffer < 0 || size_t(s.buffer) >= k_.buffers.size() || !k_.buffers[size_t(s.buffer)].output)
      throw Error(where_text(k_) + ": stores to b" + std::to_string(s.buffer) +
                  ", which is not an output slot");
    if (compute_of(s.value->type) != compute_of(k_.buffers[size_t(s.buffer)].dtype))
      throw Error(where_text(k_) + ": stores a " + std::string(dtype_name(s.value->type)) +
                  " value into " + std::string(dtype_name(k_.buffers[size_t(s.buffer)].dtype)) +
                  " slot b" + std::to_string(s.buffer));
    stores_.back().push_back({s.buffer, flatten(s.value)});
  }

  int flatten(const ExprRef& e) {
    auto it = ids_.find(e.get());
    if (it != ids_.end()) return it->second;
    Node n{e.get(), {}, e->kind == ExprKind::ReductionIndex};
    for (const ExprRef& a : e->args) {
      int id = flatten(a);
      n.args.push_back(id);
      n.loop_variant = n.loop_variant || nodes_[size_t(id)].loop_variant;
    }
    nodes_.push_back(std::move(n));
    int id = int(nodes_.size()) - 1;
    ids_[e.get()] = id;
    return id;
  }

  void reduce() {
    const DType at = k_.accumulator_type;
    const Ck ct = compute_of(at);
    const OpKind comb = k_.combiner;
    const bool arg = comb == OpKind::ArgMax || comb == OpKind::ArgMin;
    const Ck vt = arg ? compute_of(k_.body->type) : ct;
    Val acc = convert(literal(comb == OpKind::Prod ? 1 : 0, at), ct);
    Val best = convert(make(int32_t(0)), vt);
    const int64_t extent = get<int64_t>(eval(extent_));
    // The combine step as an Op node of the accumulator type, so it uses the printer's math.
    Expr combine;
    combine.type = at;
    combine.op = comb == OpKind::Sum ? OpKind::Add
                 : comb == OpKind::Prod ? OpKind::Mul
                 : comb == OpKind::ReduceMax ? OpKind::Maximum : OpKind::Minimum;
    if (!arg && comb != OpKind::Sum && comb != OpKind::Prod && comb != OpKind::ReduceMax &&
        comb != OpKind::ReduceMin)
      throw Error(where_text(k_) + ": unsupported reduction combiner " + std::string(op_name(comb)));
    in_loop_ = true;
    for (int32_t r = 0; r < extent; ++r) {
      r_ = r;
      iter_gen_ = ++gen_;
      Val v = eval(body_);
      if (arg) {
        v = convert(v, vt);
        if (r == 0 || better(comb == OpKind::ArgMax, v, best)) {
          best = v;
          acc = convert(make(r), ct);
        }
        continue;
      }
      Val args[2] = {acc, convert(v, ct)};
      // max/min start from the first element, sum/prod from their identity.
      bool first = r == 0 && (comb == OpKind::ReduceMax || comb == OpKind::ReduceMin);
      acc = first ? args[1] : apply_op(combine, args, 2, k_);
    }
    in_loop_ = false;
    acc_ = acc;
    have_acc_ = true;
  }

  // The printer's argmax/argmin test: NaN wins and the first NaN stays.
  static bool better(bool is_max, const Val& v, const Val& best) {
    if (v.k == Ck::F32 || v.k == Ck::F64) {
      double x = get<double>(v), b = get<double>(best);
      if (std::isnan(b)) return false;
      return (is_max ? x > b : x < b) || std::isnan(x);
    }
    const int64_t x = get<int64_t>(v), b = get<int64_t>(best);  // exact for int/uint/bool
    return is_max ? x > b : x < b;
  }

  Val eval(int id) {
    Node& n = nodes_[size_t(id)];
    const uint64_t gen = n.loop_variant ? iter_gen_ : elem_gen_;
    if (stamp_[size_t(id)] == gen) return vals_[size_t(id)];
    const Expr& e = *n.expr;
    Val v;
    switch (e.kind) {
      case ExprKind::Const: v = literal(e.value, e.type); break;
      case ExprKind::Param:
        if (e.index < 0 || size_t(e.index) >= params_.size())
          throw Error(where_text(k_) + ": param p[" + std::to_string(e.index) + "] of " +
                      std::to_string(params_.size()));
        v = make(params_[size_t(e.index)]);
        break;
      case ExprKind::Coord:
        if (e.index >= k_.rank) throw Error(where_text(k_) + ": coordinate c" + std::to_string(e.index) +
                                            " of a rank-" + std::to_string(k_.rank) + " space");
        v = make(e.index < 0 ? gid_ : coords_[size_t(e.index)]);
        break;
      case ExprKind::ReductionIndex:
        if (!in_loop_) throw Error(where_text(k_) + ": reads the reduction index outside the loop");
        v = make(r_);
        break;
      case ExprKind::Accumulator:
        if (!have_acc_) throw Error(where_text(k_) + ": reads the accumulator before the loop ends");
        v = convert(acc_, compute_of(e.type));
        break;
      case ExprKind::Load: v = load(e, get<int64_t>(eval(n.args[0]))); break;
      case ExprKind::Op: {
        Val args[3];
        if (n.args.size() > 3) throw Error(where_text(k_) + ": op with more than 3 arguments");
        for (size_t i = 0; i < n.args.size(); ++i) args[i] = eval(n.args[i]);
        v = apply_op(e, args, n.args.size(), k_);
        break;
      }
    }
    v = convert(v, compute_of(e.type));  // a temporary of the node's declared compute type
    stamp_[size_t(id)] = n.loop_variant ? iter_gen_ : elem_gen_;
    vals_[size_t(id)] = v;
    return v;
  }

  Val load(const Expr& e, int64_t offset) {
    if (e.index < 0 || size_t(e.index) >= buffers_.size())
      throw Error(where_text(k_) + ": loads from slot b" + std::to_string(e.index) + ", which it lacks");
    const Binding& b = buffers_[size_t(e.index)];
    auto here = [&] {
      std::string s = " at element " + std::to_string(gid_) + " (coords";
      for (int32_t c : coords_) s += " " + std::to_string(c);
      if (in_loop_) s += ", r " + std::to_string(r_);
      return s + ")";
    };
    if (k_.buffers[size_t(e.index)].output)
      throw Error(where_text(k_) + ": loads from b" + std::to_string(e.index) +
                  ", a writeonly output slot");
    if (offset < 0 || offset >= b.tensor.numel())
      throw Error(where_text(k_) + ": load from b" + std::to_string(e.index) + " (" + b.role + ", " +
                  std::to_string(b.tensor.numel()) + " elements) at offset " + std::to_string(offset) +
                  " is out of bounds" + here());
    if (b.written && !(*b.written)[size_t(offset)])
      throw Error(where_text(k_) + ": reads element " + std::to_string(offset) + " of b" +
                  std::to_string(e.index) + " (" + b.role + ") that no earlier kernel wrote" + here());
    if (e.type != b.tensor.dtype)
      throw Error(where_text(k_) + ": loads " + std::string(dtype_name(e.type)) + " from b" +
                  std::to_string(e.index) + " of dtype " + std::string(dtype_name(b.tensor.dtype)));
    return read_element(b.tensor, offset);
  }

  const LoweredKernel& lk_;
  const Kernel& k_;
  std::vector<Binding> buffers_;
  int64_t total_;
  std::vector<int32_t> params_;
  std::vector<Node> nodes_;
  std::unordered_map<const Expr*, int> ids_;
  std::vector<std::vector<std::pair<int, int>>> stores_;  // per segment: (buffer, node)
  int extent_ = -1, body_ = -1;
  std::vector<uint64_t> stamp_;
  std::vector<Val> vals_;
  uint64_t gen_ = 0, elem_gen_ = 0, iter_gen_ = 0;
  std::vector<int32_t> coords_;
  int32_t gid_ = 0, r_ = 0;
  bool in_loop_ = false, have_acc_ = false;
  Val acc_;
};

std::vector<int64_t> concrete(const Shape& shape, const std::map<std::string, int64_t>& bindings) {
  std::vector<int64_t> dims;
  for (const SymInt& d : shape) dims.push_back(d.is_static() ? d.value() : d.evaluate(bindings));
  return dims;
}

}  // namespace

void evaluate_kernel(const LoweredKernel& kernel, const std::vector<HostTensor>& buffers,
                     const std::map<std::string, int64_t>& bindings) {
  std::vector<Binding> bound;
  for (size_t i = 0; i < buffers.size(); ++i) bound.push_back({buffers[i], "buffer " + std::to_string(i)});
  KernelRunner(kernel, std::move(bound), bindings).run();
}

void evaluate(const LoweredOp& op, const std::vector<HostTensor>& inputs,
              const std::vector<HostTensor>& outputs,
              const std::map<std::string, int64_t>& bindings) {
  // Every tensor the steps may bind: inputs, outputs, then temps (LoweredOp::Step::args).
  std::vector<Binding> all;
  std::vector<std::vector<uint8_t>> written(inputs.size() + outputs.size() + op.temps.size());
  std::vector<std::vector<uint8_t>> temp_storage;
  temp_storage.reserve(op.temps.size());
  for (size_t i = 0; i < inputs.size(); ++i) all.push_back({inputs[i], "input " + std::to_string(i)});
  for (size_t i = 0; i < outputs.size(); ++i) all.push_back({outputs[i], "output " + std::to_string(i)});
  for (size_t i = 0; i < op.temps.size(); ++i) {
    HostTensor t{op.temps[i].dtype, concrete(op.temps[i].shape, bindings), nullptr};
    // 0xFF bytes: NaN for floats, so a read that slips past the written-check is loud.
    temp_storage.emplace_back(size_t(t.numel()) * dtype_size(t.dtype), uint8_t(0xFF));
    t.data = temp_storage.back().data();
    all.push_back({t, "temp " + std::to_string(i)});
  }
  for (size_t i = inputs.size(); i < all.size(); ++i) {
    written[i].assign(size_t(all[i].tensor.numel()), 0);
    all[i].written = &written[i];
  }
  for (const LoweredOp::Step& step : op.steps) {
    std::vector<Binding> bound;
    for (int a : step.args) {
      if (a < 0 || size_t(a) >= all.size())
        throw Error("kernel " + step.kernel.kernel.name + ": binds argument " + std::to_string(a) +
                    " but the op has " + std::to_string(all.size()) + " inputs/outputs/temps");
      bound.push_back(all[size_t(a)]);
    }
    KernelRunner(step.kernel, std::move(bound), bindings).run();
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const auto& w = written[inputs.size() + o];
    for (size_t i = 0; i < w.size(); ++i)
      if (!w[i]) {
        std::string names;
        for (const LoweredOp::Step& s : op.steps) names += " " + s.kernel.kernel.name;
        throw Error("lowered op (kernels" + names + ") never writes element " + std::to_string(i) +
                    " of output " + std::to_string(o));
      }
  }
}

}  // namespace kiln::kernel
