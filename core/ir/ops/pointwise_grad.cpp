// Gradient rules of the pointwise ops: unary maps, cast, clip, broadcasting binaries, where.
// Each is the derivative PyTorch documents (derivatives.yaml), written in kiln's own ops.
#include <cmath>

#include "core/ir/grad_builder.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

using G = GradBuilder;
using K = OpKind;

Value* c(G& b, double v, const Value* like) { return b.scalar(v, like->type.dtype); }
Value* mul(G& b, Value* x, Value* y) { return b.op(K::Mul, {x, y}); }
Value* div(G& b, Value* x, Value* y) { return b.op(K::Div, {x, y}); }
Value* sub(G& b, Value* x, Value* y) { return b.op(K::Sub, {x, y}); }
Value* add(G& b, Value* x, Value* y) { return b.op(K::Add, {x, y}); }
Value* neg(G& b, Value* x) { return b.op(K::Neg, {x}); }
Value* where(G& b, Value* cond, Value* x, Value* y) { return b.op(K::Where, {cond, x, y}); }
Value* gt0(G& b, Value* x) { return b.op(K::Gt, {x, c(b, 0, x)}); }

// d/dx of a unary op from (x, y = op(x), g = dL/dy).
using UnaryRule = Value* (*)(G&, Value* x, Value* y, Value* g);

Value* gelu_grad(G& b, Value* x, Value* g) {
  if (b.attrs().get_string("approximate") == "tanh") {
    // y = 0.5 x (1 + tanh(u)), u = k (x + 0.044715 x^3): dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u'.
    const double k = std::sqrt(2.0 / M_PI);
    Value* x2 = mul(b, x, x);
    Value* u = mul(b, c(b, k, x), add(b, x, mul(b, c(b, 0.044715, x), mul(b, x2, x))));
    Value* t = b.op(K::Tanh, {u});
    Value* du = mul(b, c(b, k, x), add(b, c(b, 1, x), mul(b, c(b, 3 * 0.044715, x), x2)));
    Value* left = mul(b, c(b, 0.5, x), add(b, c(b, 1, x), t));
    Value* right = mul(b, mul(b, c(b, 0.5, x), x), mul(b, sub(b, c(b, 1, x), mul(b, t, t)), du));
    return mul(b, g, add(b, left, right));
  }
  // y = x Phi(x): dy/dx = Phi(x) + x phi(x).
  Value* cdf = mul(b, c(b, 0.5, x), add(b, c(b, 1, x), b.op(K::Erf, {mul(b, x, c(b, M_SQRT1_2, x))})));
  Value* pdf = mul(b, c(b, 1 / std::sqrt(2 * M_PI), x), b.op(K::Exp, {mul(b, c(b, -0.5, x), mul(b, x, x))}));
  return mul(b, g, add(b, cdf, mul(b, x, pdf)));
}

void set_unary(std::vector<OpDef>& t, K kind, UnaryRule rule) {
  t[size_t(kind)].gradient = Gradient::Rule;
  t[size_t(kind)].vjp = [rule](G& b) -> std::vector<Value*> {
    return {rule(b, b.input(0), b.output(), b.grad())};
  };
}

// A binary op's rule gives the gradients at the output's (broadcast) shape; they are summed back
// to each operand's shape and cast to its dtype.
using BinaryRule = std::pair<Value*, Value*> (*)(G&, Value* a, Value* bv, Value* y, Value* g);

void set_binary(std::vector<OpDef>& t, K kind, BinaryRule rule) {
  t[size_t(kind)].gradient = Gradient::Rule;
  t[size_t(kind)].vjp = [rule](G& b) -> std::vector<Value*> {
    auto [ga, gb] = rule(b, b.input(0), b.input(1), b.output(), b.grad());
    auto back = [&](Value* grad, size_t i) -> Value* {
      if (!grad || !b.wanted(i)) return nullptr;
      return b.cast_to(b.sum_to(grad, b.input(i)->type.shape), b.input(i)->type.dtype);
    };
    return {back(ga, 0), back(gb, 1)};
  };
}

// maximum/minimum: the larger (smaller) operand takes the gradient; ties split it evenly, as torch.
std::pair<Value*, Value*> extremum_grad(G& b, Value* a, Value* bv, Value* g, K wins) {
  Value* zero = c(b, 0, g);
  Value* half = mul(b, g, c(b, 0.5, g));
  Value* tie = b.op(K::Eq, {a, bv});
  Value* ga = where(b, b.op(wins, {a, bv}), g, where(b, tie, half, zero));
  Value* gb = where(b, b.op(wins, {bv, a}), g, where(b, tie, half, zero));
  return {ga, gb};
}

}  // namespace

void define_pointwise_grads(std::vector<OpDef>& t) {
  set_unary(t, K::Neg, [](G& b, Value*, Value*, Value* g) { return neg(b, g); });
  set_unary(t, K::Abs, [](G& b, Value* x, Value*, Value* g) { return mul(b, g, b.op(K::Sign, {x})); });
  set_unary(t, K::Exp, [](G& b, Value*, Value* y, Value* g) { return mul(b, g, y); });
  set_unary(t, K::Log, [](G& b, Value* x, Value*, Value* g) { return div(b, g, x); });
  set_unary(t, K::Sqrt, [](G& b, Value*, Value* y, Value* g) { return div(b, g, mul(b, y, c(b, 2, y))); });
  set_unary(t, K::Rsqrt, [](G& b, Value*, Value* y, Value* g) {
    return mul(b, g, mul(b, c(b, -0.5, y), mul(b, y, mul(b, y, y))));
  });
  set_unary(t, K::Sin, [](G& b, Value* x, Value*, Value* g) { return mul(b, g, b.op(K::Cos, {x})); });
  set_unary(t, K::Cos, [](G& b, Value* x, Value*, Value* g) { return neg(b, mul(b, g, b.op(K::Sin, {x}))); });
  set_unary(t, K::Tanh, [](G& b, Value*, Value* y, Value* g) {
    return mul(b, g, sub(b, c(b, 1, y), mul(b, y, y)));
  });
  set_unary(t, K::Sigmoid, [](G& b, Value*, Value* y, Value* g) {
    return mul(b, g, mul(b, y, sub(b, c(b, 1, y), y)));
  });
  set_unary(t, K::Relu, [](G& b, Value* x, Value*, Value* g) { return where(b, gt0(b, x), g, c(b, 0, g)); });
  set_unary(t, K::LeakyRelu, [](G& b, Value* x, Value*, Value* g) {
    return where(b, gt0(b, x), g, mul(b, g, c(b, b.attrs().get_float("alpha"), g)));
  });
  set_unary(t, K::Elu, [](G& b, Value* x, Value* y, Value* g) {  // x <= 0: y + alpha = alpha e^x
    return where(b, gt0(b, x), g, mul(b, g, add(b, y, c(b, b.attrs().get_float("alpha"), y))));
  });
  set_unary(t, K::Gelu, [](G& b, Value* x, Value*, Value* g) { return gelu_grad(b, x, g); });
  set_unary(t, K::Silu, [](G& b, Value* x, Value*, Value* g) {  // s (1 + x (1 - s))
    Value* s = b.op(K::Sigmoid, {x});
    return mul(b, g, mul(b, s, add(b, c(b, 1, x), mul(b, x, sub(b, c(b, 1, x), s)))));
  });
  set_unary(t, K::Erf, [](G& b, Value* x, Value*, Value* g) {
    return mul(b, g, mul(b, c(b, 2 / std::sqrt(M_PI), x), b.op(K::Exp, {neg(b, mul(b, x, x))})));
  });
  set_unary(t, K::Reciprocal, [](G& b, Value*, Value* y, Value* g) { return neg(b, mul(b, g, mul(b, y, y))); });
  set_unary(t, K::Clip, [](G& b, Value* x, Value*, Value* g) {  // passes inside [min, max], as torch.clamp
    Value* inside = b.op(K::LogicalAnd, {b.op(K::Ge, {x, c(b, b.attrs().get_float("min"), x)}),
                                         b.op(K::Le, {x, c(b, b.attrs().get_float("max"), x)})});
    return where(b, inside, g, c(b, 0, g));
  });
  t[size_t(K::Cast)].gradient = Gradient::Rule;
  t[size_t(K::Cast)].vjp = [](G& b) -> std::vector<Value*> {
    if (!is_floating(b.input(0)->type.dtype) || !is_floating(b.output()->type.dtype)) return {nullptr};
    return {b.cast_to(b.grad(), b.input(0)->type.dtype)};
  };
  // Piecewise constant, boolean or integer results: no gradient flows (torch gives zeros).
  for (K k : {K::Floor, K::Ceil, K::Round, K::Sign, K::LogicalNot, K::Eq, K::Ne, K::Lt, K::Le, K::Gt,
              K::Ge, K::LogicalAnd, K::LogicalOr, K::LogicalXor})
    t[size_t(k)].gradient = Gradient::None;

  set_binary(t, K::Add, [](G&, Value*, Value*, Value*, Value* g) { return std::pair{g, g}; });
  set_binary(t, K::Sub, [](G& b, Value*, Value*, Value*, Value* g) { return std::pair{g, neg(b, g)}; });
  set_binary(t, K::Mul, [](G& b, Value* a, Value* bv, Value*, Value* g) {
    return std::pair{mul(b, g, bv), mul(b, g, a)};
  });
  set_binary(t, K::Div, [](G& b, Value*, Value* bv, Value* y, Value* g) {
    return std::pair{div(b, g, bv), neg(b, div(b, mul(b, g, y), bv))};
  });
  set_binary(t, K::Pow, [](G& b, Value* a, Value* bv, Value* y, Value* g) {
    Value* ga = mul(b, g, mul(b, bv, b.op(K::Pow, {a, sub(b, bv, c(b, 1, bv))})));
    // d/db a^b = a^b log(a); 0 where a == 0 and b >= 0, as torch.
    Value* at_zero = b.op(K::LogicalAnd, {b.op(K::Eq, {a, c(b, 0, a)}), b.op(K::Ge, {bv, c(b, 0, bv)})});
    Value* gb = where(b, at_zero, c(b, 0, g), mul(b, g, mul(b, y, b.op(K::Log, {a}))));
    return std::pair{ga, gb};
  });
  set_binary(t, K::Mod, [](G& b, Value* a, Value* bv, Value*, Value* g) {  // a - b q, q = floor(a / b)
    Value* q = div(b, a, bv);
    Value* whole = b.attrs().get_bool("fmod")  // C fmod: q truncated
                       ? where(b, b.op(K::Lt, {q, c(b, 0, q)}), b.op(K::Ceil, {q}), b.op(K::Floor, {q}))
                       : b.op(K::Floor, {q});
    return std::pair{g, neg(b, mul(b, g, whole))};
  });
  set_binary(t, K::Maximum, [](G& b, Value* a, Value* bv, Value*, Value* g) { return extremum_grad(b, a, bv, g, K::Gt); });
  set_binary(t, K::Minimum, [](G& b, Value* a, Value* bv, Value*, Value* g) { return extremum_grad(b, a, bv, g, K::Lt); });

  t[size_t(K::Where)].gradient = Gradient::Rule;
  t[size_t(K::Where)].vjp = [](G& b) -> std::vector<Value*> {
    Value* g = b.grad();
    Value* zero = c(b, 0, g);
    std::vector<Value*> out = {nullptr, nullptr, nullptr};
    for (size_t i : {size_t(1), size_t(2)}) {
      if (!b.wanted(i)) continue;
      Value* picked = i == 1 ? where(b, b.input(0), g, zero) : where(b, b.input(0), zero, g);
      out[i] = b.cast_to(b.sum_to(picked, b.input(i)->type.shape), b.input(i)->type.dtype);
    }
    return out;
  };
}

}  // namespace kiln::ops
