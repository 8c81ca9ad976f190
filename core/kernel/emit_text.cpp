// The text of values and ops in each dialect (emit_text.h).
#include "core/kernel/emit_text.h"

#include <cmath>
#include <cstdio>

#include "core/support/error.h"

namespace kiln::kernel {

bool glsl(Dialect d) { return d == Dialect::Glsl; }
bool cpp(Dialect d) { return d == Dialect::Cpp; }

std::string compute_type(DType t, Dialect d) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return "float";
    case DType::F64: return "double";
    case DType::I8: case DType::I16: case DType::I32: return "int";
    case DType::I64: return "int64_t";  // the CUDA prelude typedefs the GLSL names
    case DType::U8: case DType::U16: case DType::U32: return "uint";
    case DType::U64: return "uint64_t";
    case DType::Bool: return "bool";
  }
  return "float";
}

std::string storage_type(DType t, Dialect d) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F16: return glsl(d) ? "float16_t" : cpp(d) ? "_Float16" : "__half";
    case DType::BF16: return "uint16_t";
    case DType::F64: return "double";
    case DType::I8: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int";
    case DType::I64: return "int64_t";
    case DType::U16: return "uint16_t";
    case DType::U32: return "uint";
    case DType::U64: return "uint64_t";
    case DType::U8: case DType::Bool: return "uint8_t";
  }
  return "float";
}

bool is_narrow_integer(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::U8 || t == DType::U16;
}

std::string load_text(DType t, const std::string& elem, Dialect d) {
  switch (t) {
    case DType::F16: return glsl(d) || cpp(d) ? "float(" + elem + ")" : "__half2float(" + elem + ")";
    case DType::BF16:
      return "uintBitsToFloat(uint(" + elem + ") << 16)";
    case DType::U8: case DType::U16: case DType::I8: case DType::I16:
      return compute_type(t, d) + "(" + elem + ")";
    case DType::Bool: return "(" + elem + " != " + storage_type(t, d) + "(0))";
    default: return elem;
  }
}

std::string store_text(DType t, const std::string& v, Dialect d) {
  switch (t) {
    case DType::F16:
      return glsl(d) ? "float16_t(" + v + ")" : cpp(d) ? "_Float16(" + v + ")" : "__float2half_rn(" + v + ")";
    case DType::BF16: return "kiln_to_bf16(" + v + ")";
    case DType::U8: case DType::U16: case DType::I8: case DType::I16:
      return storage_type(t, d) + "(" + v + ")";
    case DType::Bool: return storage_type(t, d) + "(" + v + " ? 1 : 0)";
    default: return v;
  }
}

std::string float_literal(double v, DType t, Dialect d) {
  std::string type = compute_type(t, d);
  if (std::isnan(v)) return "kiln_nan()";
  if (std::isinf(v)) return v > 0 ? type + "(kiln_inf())" : type + "(-kiln_inf())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (t == DType::F64) return glsl(d) ? s + "LF" : s;
  return glsl(d) ? s : s + "f";
}

std::string literal(double v, DType t, Dialect d) {
  if (is_floating(t)) return float_literal(v, t, d);
  if (t == DType::Bool) return v != 0 ? "true" : "false";
  char buf[64];
  if (t == DType::U64)  // negative values wrap as in C; 2^64 and past it pin to the largest
    std::snprintf(buf, sizeof buf, "%llu",
                  v < 0 ? static_cast<unsigned long long>(static_cast<long long>(v))
                  : v >= 18446744073709551615.0 ? ~0ull : static_cast<unsigned long long>(v));
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  std::string digits = buf;
  // 64-bit literals need their suffix, or values past 32 bits are rejected.
  if (t == DType::I64) digits += glsl(d) ? "l" : "ll";
  if (t == DType::U64) digits += glsl(d) ? "ul" : "ull";
  if (compute_type(t, d) == "uint") digits += "u";
  return compute_type(t, d) + "(" + digits + ")";
}

namespace {

// A float converted to the integer type `type`, pinned as the reference pins it: NaN -> 0, values
// past the type's range -> its limits.
std::string saturating_float_to_integer(const std::string& x, DType type, Dialect d) {
  double lo = 0, hi = 0;
  switch (type) {
    case DType::I8: lo = -128, hi = 127; break;
    case DType::I16: lo = -32768, hi = 32767; break;
    case DType::I32: lo = -2147483648.0, hi = 2147483647.0; break;
    case DType::U8: hi = 255; break;
    case DType::U16: hi = 65535; break;
    case DType::U32: hi = 4294967295.0; break;
    case DType::U64: hi = 18446744073709551615.0; break;
    default: return compute_type(type, d) + "(" + x + ")";
  }
  // -2147483648 is a negated literal its type cannot hold.
  std::string lo_text = type == DType::I32 ? "(-2147483647 - 1)" : literal(lo, type, d);
  std::string hi_text = literal(hi, type, d);
  char bounds[2][64];
  std::snprintf(bounds[0], sizeof bounds[0], "%.1f", lo);
  std::snprintf(bounds[1], sizeof bounds[1], "%.1f", hi);
  return "(isnan(" + x + ") ? " + literal(0, type, d) + " : " + x + " >= " + bounds[1] + " ? " + hi_text +
         " : " + x + " <= " + bounds[0] + " ? " + lo_text + " : " + compute_type(type, d) + "(" + x + "))";
}

std::string unwrapped_op_expression(OpKind op, const AttrMap& attrs, DType type, const std::vector<DType>& arg_types,
                                    std::vector<std::string> a, Dialect d, bool index_math) {
  std::string t = compute_type(type, d);
  auto arg_t = [&](size_t i) { return compute_type(arg_types.at(i), d); };
  auto one = [&] { return literal(1, type, d); };
  if (type == DType::Bool) {  // bool arithmetic is logic, as in the reference
    switch (op) {
      case OpKind::Add: case OpKind::Maximum: return a[0] + " || " + a[1];
      case OpKind::Mul: case OpKind::Minimum: return a[0] + " && " + a[1];
      case OpKind::Sub: return a[0] + " != " + a[1];
      case OpKind::Abs: case OpKind::Relu: case OpKind::Sign: case OpKind::Neg: return a[0];
      default: break;
    }
  }
  if (is_unsigned(type)) {  // no abs/sign for unsigned in GLSL
    if (op == OpKind::Abs) return a[0];
    if (op == OpKind::Sign) return "(" + a[0] + " > " + literal(0, type, d) + " ? " + one() + " : " + literal(0, type, d) + ")";
  }
  // Comparisons of bools compare them as 0/1.
  bool bool_args = !arg_types.empty() && arg_types[0] == DType::Bool;
  if (bool_args && (op == OpKind::Lt || op == OpKind::Le || op == OpKind::Gt || op == OpKind::Ge))
    for (std::string& x : a) x = "int(" + x + ")";
  // GLSL has no double transcendentals: compute those in float (f64 is then f32-accurate). C++
  // has them all (and tanh and erf of the C library, as the reference uses).
  auto call = [&](const char* name, const std::string& x) {
    if (type == DType::F64 && !cpp(d)) return std::string("double(") + name + "(float(" + x + ")))";
    return std::string(name) + "(" + x + ")";
  };
  const char* tanh_fn = cpp(d) ? "std::tanh" : "kiln_tanh";
  const char* erf_fn = cpp(d) ? "std::erf" : "kiln_erf";
  switch (op) {
    case OpKind::Neg: return "-" + a[0];
    case OpKind::Abs: return "abs(" + a[0] + ")";
    case OpKind::Exp: return call("exp", a[0]);
    case OpKind::Log: return call("log", a[0]);
    case OpKind::Sqrt: return "sqrt(" + a[0] + ")";
    case OpKind::Rsqrt: return one() + " / sqrt(" + a[0] + ")";
    case OpKind::Sin: return call("sin", a[0]);
    case OpKind::Cos: return call("cos", a[0]);
    case OpKind::Tanh: return std::string(tanh_fn) + "(" + a[0] + ")";
    case OpKind::Sigmoid: return one() + " / (" + one() + " + " + call("exp", "-" + a[0]) + ")";
    case OpKind::Relu: return a[0] + " > " + literal(0, type, d) + " ? " + a[0] + " : " + literal(0, type, d);
    case OpKind::LeakyRelu:
      return a[0] + " >= " + literal(0, type, d) + " ? " + a[0] + " : " +
             literal(attrs.get_float("alpha"), type, d) + " * " + a[0];
    case OpKind::Elu:
      return a[0] + " > " + literal(0, type, d) + " ? " + a[0] + " : " +
             literal(attrs.get_float("alpha"), type, d) + " * (" + call("exp", a[0]) + " - " + one() + ")";
    case OpKind::Gelu:
      if (attrs.get_string("approximate") == "tanh")
        return literal(0.5, type, d) + " * " + a[0] + " * (" + one() + " + " + tanh_fn + "(" +
               literal(0.7978845608028654, type, d) + " * (" + a[0] + " + " +
               literal(0.044715, type, d) + " * " + a[0] + " * " + a[0] + " * " + a[0] + ")))";
      return literal(0.5, type, d) + " * " + a[0] + " * (" + one() + " + " + erf_fn + "(" + a[0] +
             " * " + literal(0.7071067811865476, type, d) + "))";
    case OpKind::Silu: return a[0] + " / (" + one() + " + " + call("exp", "-" + a[0]) + ")";
    case OpKind::Erf: return std::string(erf_fn) + "(" + a[0] + ")";
    case OpKind::Floor: return is_floating(type) ? "floor(" + a[0] + ")" : a[0];
    case OpKind::Ceil: return is_floating(type) ? "ceil(" + a[0] + ")" : a[0];
    case OpKind::Round: return is_floating(type) ? "roundEven(" + a[0] + ")" : a[0];
    case OpKind::Sign: return is_floating(type) ? "sign(" + a[0] + ")" : t + "(sign(" + a[0] + "))";
    case OpKind::Reciprocal: return one() + " / " + a[0];
    case OpKind::LogicalNot: return "!" + a[0];
    case OpKind::Cast:
      if (type == DType::Bool) return "(" + a[0] + " != " + arg_t(0) + "(0))";
      if (arg_types[0] == DType::Bool) return "(" + a[0] + " ? " + one() + " : " + literal(0, type, d) + ")";
      if (is_floating(arg_types[0]) && is_integral(type) && type != DType::I64)
        return saturating_float_to_integer(a[0], type, d);  // as the reference converts
      return t + "(" + a[0] + ")";
    case OpKind::Clip: {
      double lo = attrs.get_float("min"), hi = attrs.get_float("max");
      std::string v = a[0];
      if (!std::isinf(lo)) v = "kiln_max(" + v + ", " + literal(lo, type, d) + ")";
      if (!std::isinf(hi)) v = "kiln_min(" + v + ", " + literal(hi, type, d) + ")";
      return is_floating(type) ? "(isnan(" + a[0] + ") ? " + a[0] + " : " + v + ")" : v;
    }
    case OpKind::Add: return a[0] + " + " + a[1];
    case OpKind::Sub: return a[0] + " - " + a[1];
    case OpKind::Mul: return a[0] + " * " + a[1];
    case OpKind::Div:
      return glsl(d) && type == DType::F32 ? "kiln_div(" + a[0] + ", " + a[1] + ")" : a[0] + " / " + a[1];
    case OpKind::Pow: return "kiln_pow(" + a[0] + ", " + a[1] + ")";
    case OpKind::Maximum: return "kiln_max(" + a[0] + ", " + a[1] + ")";
    case OpKind::Minimum: return "kiln_min(" + a[0] + ", " + a[1] + ")";
    case OpKind::Mod:
      if (type == DType::I32 && attrs.has("fmod") && attrs.get_bool("fmod") && index_math)
        return a[0] + " % " + a[1];  // index math: both operands are non-negative
      return "kiln_rem(" + a[0] + ", " + a[1] + ", " + (attrs.get_bool("fmod") ? "true" : "false") + ")";
    case OpKind::Eq: return a[0] + " == " + a[1];
    case OpKind::Ne: return a[0] + " != " + a[1];
    case OpKind::Lt: return a[0] + " < " + a[1];
    case OpKind::Le: return a[0] + " <= " + a[1];
    case OpKind::Gt: return a[0] + " > " + a[1];
    case OpKind::Ge: return a[0] + " >= " + a[1];
    case OpKind::LogicalAnd: return a[0] + " && " + a[1];
    case OpKind::LogicalOr: return a[0] + " || " + a[1];
    case OpKind::LogicalXor: return a[0] + " != " + a[1];
    case OpKind::Where: return a[0] + " ? " + a[1] + " : " + a[2];
    case OpKind::RandUniform:
      return "kiln_uniform(" + a[0] + ", " + a[1] + ", " + (attrs.get_bool("mix") ? "true" : "false") + ")";
    default:
      throw Error("emit: op '" + std::string(op_name(op)) + "' has no expression form");
  }
}

}  // namespace

std::string op_expression(OpKind op, const AttrMap& attrs, DType type, const std::vector<DType>& arg_types,
                          std::vector<std::string> args, Dialect d, bool index_math) {
  std::string text = unwrapped_op_expression(op, attrs, type, arg_types, std::move(args), d, index_math);
  // Values of 8- and 16-bit integers compute in 32 bits; each op's result wraps to its type, as
  // the reference stores it, so a fused chain overflows exactly where the reference does.
  if (is_narrow_integer(type)) return compute_type(type, d) + "(" + storage_type(type, d) + "(" + text + "))";
  return text;
}

}  // namespace kiln::kernel
