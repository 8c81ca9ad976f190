// Shape and dtype rules of the pointwise ops: unary maps, cast, clip, broadcasting binaries, where.
#include <limits>

#include "core/ir/op.h"

namespace kiln::ops {
namespace {

bool float_only(OpKind k) {
  switch (k) {
    case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt: case OpKind::Rsqrt:
    case OpKind::Sin: case OpKind::Cos: case OpKind::Tanh: case OpKind::Sigmoid:
    case OpKind::LeakyRelu: case OpKind::Elu: case OpKind::Gelu: case OpKind::Silu:
    case OpKind::Erf: case OpKind::Reciprocal:
      return true;
    default:
      return false;
  }
}

std::vector<TensorType> unary_rule(const InferContext& ctx) {
  TensorType t = ctx.input(0);
  if (float_only(ctx.kind()) && !is_floating(t.dtype))
    ctx.fail("needs a floating-point input, got " + std::string(dtype_name(t.dtype)) +
             "; cast it first");
  if (ctx.kind() == OpKind::LogicalNot) t.dtype = DType::Bool;
  if (ctx.kind() == OpKind::Cast) t.dtype = ctx.attrs().get_dtype("dtype");
  if (ctx.kind() == OpKind::Clip && t.dtype == DType::Bool) ctx.fail("clip is not defined for bool");
  return {t};
}

bool is_comparison(OpKind k) {
  return k == OpKind::Eq || k == OpKind::Ne || k == OpKind::Lt || k == OpKind::Le ||
         k == OpKind::Gt || k == OpKind::Ge;
}

bool is_logical(OpKind k) {
  return k == OpKind::LogicalAnd || k == OpKind::LogicalOr || k == OpKind::LogicalXor;
}

std::vector<TensorType> binary_rule(const InferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  auto shape = broadcast_shapes(a.shape, b.shape);
  if (!shape) ctx.fail("shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) +
                       " cannot be broadcast together");
  DType out = promote_types(a.dtype, b.dtype);
  OpKind k = ctx.kind();
  if (is_comparison(k) || is_logical(k)) out = DType::Bool;
  if ((k == OpKind::Pow || k == OpKind::Mod || k == OpKind::Div) && out == DType::Bool)
    ctx.fail("is not defined for bool operands");
  return {{out, *shape}};
}

std::vector<TensorType> where_rule(const InferContext& ctx) {
  const TensorType& c = ctx.input(0);
  const TensorType& a = ctx.input(1);
  const TensorType& b = ctx.input(2);
  if (c.dtype != DType::Bool) ctx.fail("condition must be bool, got " + std::string(dtype_name(c.dtype)));
  auto ab = broadcast_shapes(a.shape, b.shape);
  auto all = ab ? broadcast_shapes(c.shape, *ab) : std::nullopt;
  if (!all) ctx.fail("shapes " + shape_str(c.shape) + ", " + shape_str(a.shape) + " and " +
                     shape_str(b.shape) + " cannot be broadcast together");
  return {{promote_types(a.dtype, b.dtype), *all}};
}

OpDef unary(OpKind kind, std::vector<AttrSpec> attrs = {}) {
  OpDef d;
  d.kind = kind;
  d.attrs = std::move(attrs);
  d.min_inputs = d.max_inputs = 1;
  d.infer = unary_rule;
  return d;
}

OpDef binary(OpKind kind, std::vector<AttrSpec> attrs = {}) {
  OpDef d;
  d.kind = kind;
  d.attrs = std::move(attrs);
  d.min_inputs = d.max_inputs = 2;
  d.infer = binary_rule;
  return d;
}

}  // namespace

void define_unary(std::vector<OpDef>& t) {
  for (OpKind k : {OpKind::Neg, OpKind::Abs, OpKind::Exp, OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt,
                   OpKind::Sin, OpKind::Cos, OpKind::Tanh, OpKind::Sigmoid, OpKind::Relu,
                   OpKind::Silu, OpKind::Erf, OpKind::Floor, OpKind::Ceil, OpKind::Round,
                   OpKind::Sign, OpKind::Reciprocal, OpKind::LogicalNot})
    t.push_back(unary(k));
  t.push_back(unary(OpKind::LeakyRelu, {{"alpha", AttrType::Float, 0.01}}));
  t.push_back(unary(OpKind::Elu, {{"alpha", AttrType::Float, 1.0}}));
  // approximate: "none" (erf form) or "tanh", as in PyTorch.
  t.push_back(unary(OpKind::Gelu, {{"approximate", AttrType::String, std::string("none")}}));
  t.push_back(unary(OpKind::Cast, {{"dtype", AttrType::Type, std::nullopt}}));
  const double inf = std::numeric_limits<double>::infinity();
  t.push_back(unary(OpKind::Clip, {{"min", AttrType::Float, -inf}, {"max", AttrType::Float, inf}}));
}

void define_binary(std::vector<OpDef>& t) {
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow,
                   OpKind::Maximum, OpKind::Minimum, OpKind::Eq, OpKind::Ne, OpKind::Lt,
                   OpKind::Le, OpKind::Gt, OpKind::Ge, OpKind::LogicalAnd, OpKind::LogicalOr,
                   OpKind::LogicalXor})
    t.push_back(binary(k));
  // fmod=false: the result takes the divisor's sign (PyTorch remainder); true: C fmod.
  t.push_back(binary(OpKind::Mod, {{"fmod", AttrType::Bool, false}}));
  OpDef w;
  w.kind = OpKind::Where;
  w.min_inputs = w.max_inputs = 3;
  w.infer = where_rule;
  t.push_back(std::move(w));
}

}  // namespace kiln::ops
