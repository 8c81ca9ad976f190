// DType tables and the 16-bit float conversions.
#include "core/ir/dtype.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::U8: case DType::I8: case DType::Bool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  for (DType d : kAllDTypes) {
    if (dtype_name(d) == name) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool is_floating(DType d) {
  return d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::F64;
}

bool is_unsigned(DType d) {
  return d == DType::U8 || d == DType::U16 || d == DType::U32 || d == DType::U64;
}

bool is_integral(DType d) {
  return is_unsigned(d) || d == DType::I8 || d == DType::I16 || d == DType::I32 || d == DType::I64;
}

namespace {
// Rank within a category; higher wins.
int float_rank(DType d) {
  switch (d) {
    case DType::F16: return 1;
    case DType::BF16: return 1;
    case DType::F32: return 2;
    case DType::F64: return 3;
    default: return 0;
  }
}
// The signed type of `bytes` bytes (i64 for anything wider).
DType signed_of_size(size_t bytes) {
  return bytes <= 1 ? DType::I8 : bytes == 2 ? DType::I16 : bytes == 4 ? DType::I32 : DType::I64;
}

// Two integer types (or bools): the narrower one that holds both, as PyTorch and NumPy promote;
// u64 with a signed type gives i64 (NumPy gives f64, PyTorch refuses).
DType promote_integers(DType a, DType b) {
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_unsigned(a) == is_unsigned(b)) return dtype_size(a) >= dtype_size(b) ? a : b;
  DType u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
  if (dtype_size(s) > dtype_size(u)) return s;
  return signed_of_size(2 * dtype_size(u));
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    // f16 with bf16 has no common 16-bit type; PyTorch promotes to f32.
    if (float_rank(a) == float_rank(b)) return DType::F32;
    return float_rank(a) > float_rank(b) ? a : b;
  }
  return promote_integers(a, b);
}

half::half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) {  // inf or nan
    bits = uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0u));
    return;
  }
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) {  // overflow to inf
    bits = uint16_t(sign | 0x7c00u);
    return;
  }
  if (e <= 0) {  // subnormal or zero
    if (e < -10) {
      bits = uint16_t(sign);
      return;
    }
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    bits = uint16_t(sign | h);
    return;
  }
  uint32_t h = sign | (uint32_t(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // round to nearest even; may carry into exp
  bits = uint16_t(h);
}

half::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

bfloat16::bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) {
    bits = uint16_t((x >> 16) | 0x40u);
    return;
  }
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
  bits = uint16_t((x + rounding) >> 16);
}

}  // namespace kiln

namespace kiln {

void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n) {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, n * dtype_size(src_dtype));
    return;
  }
  visit_dtype(src_dtype, [&]<class S>() {
    visit_dtype(dst_dtype, [&]<class D>() {
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (size_t i = 0; i < n; ++i) {
        auto v = compute_t<S>(s[i]);
        if constexpr (std::is_same_v<D, bool>) {
          d[i] = v != 0;
        } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<decltype(v)>) {
          // NaN/out of range is undefined in C++; pin it to 0 / the limits instead.
          if (std::isnan(v)) d[i] = 0;
          else if (v >= double(std::numeric_limits<D>::max())) d[i] = std::numeric_limits<D>::max();
          else if (v <= double(std::numeric_limits<D>::lowest())) d[i] = std::numeric_limits<D>::lowest();
          else d[i] = D(v);
        } else {
          d[i] = D(compute_t<D>(v));
        }
      }
    });
  });
}

}  // namespace kiln
