// Pointwise op functions: unary maps, cast, clip, broadcasting binaries and where.
#include <limits>

#include "core/frontend/dispatch.h"
#include "core/frontend/ops.h"

namespace kiln {

#define KILN_DEFINE_UNARY(name, kind) \
  Tensor name(const Tensor& x, Loc loc) { return run_op1(OpKind::kind, {x}, {}, loc); }
KILN_DEFINE_UNARY(neg, Neg)
KILN_DEFINE_UNARY(abs, Abs)
KILN_DEFINE_UNARY(exp, Exp)
KILN_DEFINE_UNARY(log, Log)
KILN_DEFINE_UNARY(sqrt, Sqrt)
KILN_DEFINE_UNARY(rsqrt, Rsqrt)
KILN_DEFINE_UNARY(sin, Sin)
KILN_DEFINE_UNARY(cos, Cos)
KILN_DEFINE_UNARY(tanh, Tanh)
KILN_DEFINE_UNARY(sigmoid, Sigmoid)
KILN_DEFINE_UNARY(relu, Relu)
KILN_DEFINE_UNARY(silu, Silu)
KILN_DEFINE_UNARY(erf, Erf)
KILN_DEFINE_UNARY(floor, Floor)
KILN_DEFINE_UNARY(ceil, Ceil)
KILN_DEFINE_UNARY(round, Round)
KILN_DEFINE_UNARY(sign, Sign)
KILN_DEFINE_UNARY(reciprocal, Reciprocal)
KILN_DEFINE_UNARY(logical_not, LogicalNot)
#undef KILN_DEFINE_UNARY

Tensor leaky_relu(const Tensor& x, double negative_slope, Loc loc) {
  return run_op1(OpKind::LeakyRelu, {x}, {{"alpha", negative_slope}}, loc);
}

Tensor elu(const Tensor& x, double alpha, Loc loc) {
  return run_op1(OpKind::Elu, {x}, {{"alpha", alpha}}, loc);
}

Tensor gelu(const Tensor& x, std::string_view approximate, Loc loc) {
  if (approximate != "none" && approximate != "tanh")
    throw Error("gelu: approximate must be \"none\" or \"tanh\", got \"" +
                std::string(approximate) + "\" at " + short_location(loc));
  return run_op1(OpKind::Gelu, {x}, {{"approximate", std::string(approximate)}}, loc);
}

Tensor cast(const Tensor& x, DType dtype, Loc loc) {
  return run_op1(OpKind::Cast, {x}, {{"dtype", dtype}}, loc);
}

Tensor clip(const Tensor& x, std::optional<double> min, std::optional<double> max, Loc loc) {
  const double inf = std::numeric_limits<double>::infinity();
  return run_op1(OpKind::Clip, {x}, {{"min", min.value_or(-inf)}, {"max", max.value_or(inf)}}, loc);
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max, Loc loc) {
  return clip(x, min, max, loc);
}

#define KILN_DEFINE_BINARY(name, kind, attrs)                                   \
  Tensor name(const Tensor& a, const Tensor& b, Loc loc) {                      \
    return run_op1(OpKind::kind, {a, b}, attrs, loc);                           \
  }                                                                             \
  Tensor name(const Tensor& a, double b, Loc loc) {                             \
    return run_op1(OpKind::kind, {a, scalar_operand(b, a, loc)}, attrs, loc);   \
  }
KILN_DEFINE_BINARY(add, Add, {})
KILN_DEFINE_BINARY(sub, Sub, {})
KILN_DEFINE_BINARY(mul, Mul, {})
KILN_DEFINE_BINARY(div, Div, {})
KILN_DEFINE_BINARY(pow, Pow, {})
KILN_DEFINE_BINARY(maximum, Maximum, {})
KILN_DEFINE_BINARY(minimum, Minimum, {})
KILN_DEFINE_BINARY(remainder, Mod, (AttrMap{{"fmod", false}}))
KILN_DEFINE_BINARY(fmod, Mod, (AttrMap{{"fmod", true}}))
KILN_DEFINE_BINARY(eq, Eq, {})
KILN_DEFINE_BINARY(ne, Ne, {})
KILN_DEFINE_BINARY(lt, Lt, {})
KILN_DEFINE_BINARY(le, Le, {})
KILN_DEFINE_BINARY(gt, Gt, {})
KILN_DEFINE_BINARY(ge, Ge, {})
#undef KILN_DEFINE_BINARY

Tensor logical_and(const Tensor& a, const Tensor& b, Loc loc) {
  return run_op1(OpKind::LogicalAnd, {a, b}, {}, loc);
}
Tensor logical_or(const Tensor& a, const Tensor& b, Loc loc) {
  return run_op1(OpKind::LogicalOr, {a, b}, {}, loc);
}
Tensor logical_xor(const Tensor& a, const Tensor& b, Loc loc) {
  return run_op1(OpKind::LogicalXor, {a, b}, {}, loc);
}
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b, Loc loc) {
  return run_op1(OpKind::Where, {condition, a, b}, {}, loc);
}

}  // namespace kiln
