// Element types, their sizes and names, and the 16-bit float storage types.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln {

// Appended types keep the earlier types' numbers.
enum class DType : uint8_t { F32, F16, BF16, F64, I32, I64, U8, Bool, I8, I16, U16, U32, U64 };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32,
                                       DType::I64, DType::U8,  DType::Bool, DType::I8,  DType::I16,
                                       DType::U16, DType::U32, DType::U64};

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);          // "f32", "bf16", "bool", ...
bool parse_dtype(std::string_view name, DType* out);
bool is_floating(DType dtype);                     // f32 f16 bf16 f64
bool is_integral(DType dtype);                     // i8 i16 i32 i64 u8 u16 u32 u64 (not bool)
bool is_unsigned(DType dtype);                     // u8 u16 u32 u64
// The type two operands compute in (PyTorch's promotion: float beats int, wider beats narrower).
DType promote_types(DType a, DType b);

// IEEE binary16, stored; arithmetic happens in float.
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f);  // NOLINT: implicit, like a builtin float type
  operator float() const;
};

// bfloat16 (the top half of a float32), stored; arithmetic happens in float.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f);  // NOLINT
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// The type arithmetic on T happens in: float for the 16-bit storage types, T otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<half> { using type = float; };
template <> struct compute_type<bfloat16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// Maps a C++ element type to its DType, for from_vector / to_vector.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };
template <> struct dtype_of<half> { static constexpr DType value = DType::F16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::I32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::I64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::I8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::I16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::U16; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::U32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::U64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };

// Calls fn.template operator()<T>() with T the storage type of dtype.
template <class Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F16: return fn.template operator()<half>();
    case DType::BF16: return fn.template operator()<bfloat16>();
    case DType::F64: return fn.template operator()<double>();
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    case DType::U8: return fn.template operator()<uint8_t>();
    case DType::Bool: return fn.template operator()<bool>();
    case DType::I8: return fn.template operator()<int8_t>();
    case DType::I16: return fn.template operator()<int16_t>();
    case DType::U16: return fn.template operator()<uint16_t>();
    case DType::U32: return fn.template operator()<uint32_t>();
    case DType::U64: return fn.template operator()<uint64_t>();
  }
  return fn.template operator()<float>();
}

}  // namespace kiln

namespace kiln {
// Converts n elements between any two dtypes (float→int truncates toward zero; →bool is != 0).
void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, size_t n);
}  // namespace kiln
