// ONNX elementwise ops -> kiln pointwise ops: unary maps, activations (some decomposed),
// broadcasting binaries, variadic Sum/Mean/Max/Min, comparisons, logic, Where, Cast, Clip.
#include <cmath>
#include <limits>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;

void require_float(N& n, size_t i = 0) {
  if (!is_floating(n.input_type(i).dtype))
    n.unsupported("element type " + std::string(dtype_name(n.input_type(i).dtype)) +
                  " (kiln's " + n.op_type() + " needs floating point)");
}

Value* scalar_like(N& n, double v, Value* like) { return n.scalar(v, like->type.dtype); }

void unary(OpTable& t, const std::string& name, OpKind kind, bool float_only) {
  t[name] = [kind, float_only](N& n) {
    if (float_only) require_float(n);
    n.set_output(0, n.emit(kind, {n.input(0)}));
  };
}

// Before opset 7, broadcast=1 lines B's dims up with A's from `axis` (default: A's last dims):
// B as A's rank, with 1 elsewhere, broadcasts the same way today's rules do.
Value* legacy_broadcast_operand(N& n, Value* a, Value* b) {
  const int64_t ra = int64_t(a->type.rank()), rb = int64_t(b->type.rank());
  int64_t axis = n.attr_int("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    n.fail("legacy broadcast: B " + b->type.str() + " does not fit A " + a->type.str() + " at axis " +
           std::to_string(n.attr_int("axis", ra - rb)));
  Shape shape(size_t(ra), SymInt(1));
  for (int64_t i = 0; i < rb; ++i) shape[size_t(axis + i)] = b->type.shape[size_t(i)];
  return n.reshape(b, shape);
}

// Binary op; the result keeps the first operand's dtype (ONNX types both the same, except Pow).
void binary(OpTable& t, const std::string& name, OpKind kind) {
  t[name] = [kind](N& n) {
    Value* a = n.input(0);
    Value* b = n.input(1);
    if (n.opset() < 7 && n.attr_int("broadcast", 0)) b = legacy_broadcast_operand(n, a, b);
    Value* r = n.emit(kind, {a, b});
    if (kind == OpKind::Pow) r = n.cast(r, a->type.dtype);
    n.set_output(0, r);
  };
}

// Max/Min/Sum over any number of inputs, left to right.
void variadic(OpTable& t, const std::string& name, OpKind kind, bool mean) {
  t[name] = [kind, mean](N& n) {
    Value* acc = n.input(0);
    for (size_t i = 1; i < n.num_inputs(); ++i) acc = n.emit(kind, {acc, n.input(i)});
    if (mean) acc = n.emit(OpKind::Div, {acc, scalar_like(n, double(n.num_inputs()), acc)});
    n.set_output(0, acc);
  };
}

// BitShift on unsigned integers: x * 2^y (wrapping to x's width) or x / 2^y; a shift by the
// type's width or more gives 0, as NumPy's shifts do.
void map_bit_shift(N& n) {
  Value* x = n.input(0);
  const DType dt = x->type.dtype;
  if (!is_unsigned(dt)) n.unsupported("element type " + std::string(dtype_name(dt)) + " (BitShift takes unsigned integers)");
  const std::string direction = n.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") n.fail("direction must be LEFT or RIGHT, got '" + direction + "'");
  Value* y = n.input(1);
  Value* width = n.scalar(double(8 * dtype_size(dt)), dt);
  // 2^y for y below the width (2^width wraps to 0, and a right shift would divide by it).
  Value* in_range = n.emit(OpKind::Minimum, {y, n.scalar(double(8 * dtype_size(dt) - 1), dt)});
  Value* power = n.emit(OpKind::Pow, {n.scalar(2, dt), in_range});
  Value* shifted = n.emit(direction == "LEFT" ? OpKind::Mul : OpKind::Div, {x, power});
  Value* too_far = n.emit(OpKind::Ge, {y, width});
  n.set_output(0, n.emit(OpKind::Where, {too_far, n.scalar(0, dt), shifted}));
}

Value* softplus(N& n, Value* x) {
  Value* e = n.emit(OpKind::Exp, {x});
  return n.emit(OpKind::Log, {n.emit(OpKind::Add, {e, scalar_like(n, 1, x)})});
}

// atan without an atan op: two half-angle steps, atan(x) = 2 atan(x / (1 + sqrt(1 + x^2))),
// bring |x| below tan(pi/8), where the odd Taylor series to x^11 is within 2e-6 after scaling.
Value* atan_of(N& n, Value* x) {
  const DType dt = x->type.dtype;
  Value* one = n.scalar(1, dt);
  Value* t = x;
  for (int step = 0; step < 2; ++step) {
    Value* r = n.emit(OpKind::Sqrt, {n.emit(OpKind::Add, {one, n.emit(OpKind::Mul, {t, t})})});
    t = n.emit(OpKind::Div, {t, n.emit(OpKind::Add, {one, r})});
  }
  Value* t2 = n.emit(OpKind::Mul, {t, t});
  Value* poly = n.scalar(-1.0 / 11, dt);  // Horner in t^2: 1 - t^2/3 + t^4/5 - ...
  for (double c : {1.0 / 9, -1.0 / 7, 1.0 / 5, -1.0 / 3, 1.0})
    poly = n.emit(OpKind::Add, {n.emit(OpKind::Mul, {poly, t2}), n.scalar(c, dt)});
  return n.emit(OpKind::Mul, {n.emit(OpKind::Mul, {t, poly}), n.scalar(4, dt)});
}

// asin(x) = 2 atan(x / (1 + sqrt(1 - x^2))), defined on [-1, 1].
Value* asin_of(N& n, Value* x) {
  const DType dt = x->type.dtype;
  Value* one = n.scalar(1, dt);
  Value* r = n.emit(OpKind::Sqrt, {n.emit(OpKind::Sub, {one, n.emit(OpKind::Mul, {x, x})})});
  Value* a = atan_of(n, n.emit(OpKind::Div, {x, n.emit(OpKind::Add, {one, r})}));
  return n.emit(OpKind::Mul, {a, n.scalar(2, dt)});
}

void map_clip(N& n) {
  Value* x = n.input(0);
  if (n.opset() < 11) {
    const double inf = std::numeric_limits<double>::infinity();
    n.set_output(0, n.emit(OpKind::Clip, {x}, {{"min", n.attr_float("min", -inf)},
                                                {"max", n.attr_float("max", inf)}}));
    return;
  }
  for (size_t i = 1; i <= 2; ++i) {
    if (!n.has_input(i)) continue;
    if (n.input_type(i).rank() != 0 && numel(n.input_type(i).shape).hint() != 1)
      n.fail("min/max must be scalars, got " + n.input_type(i).str());
    const OpKind k = i == 1 ? OpKind::Maximum : OpKind::Minimum;
    Value* bound = n.input(i);
    if (bound->type.rank() != 0) bound = n.reshape(bound, {});
    x = n.emit(k, {x, bound});
  }
  n.set_output(0, x);
}

void map_cast(N& n, DType to) { n.set_output(0, n.cast(n.input(0), to)); }

DType cast_target(N& n) {
  const int64_t to = n.attr_int("to", 0);
  DType d;
  if (!dtype_from_onnx(int(to), &d)) n.unsupported("cast to " + onnx_type_name(int(to)));
  return d;
}

}  // namespace

void register_elementwise_ops(OpTable& t) {
  unary(t, "Abs", OpKind::Abs, false);
  unary(t, "Neg", OpKind::Neg, false);
  unary(t, "Exp", OpKind::Exp, true);
  unary(t, "Log", OpKind::Log, true);
  unary(t, "Sqrt", OpKind::Sqrt, true);
  unary(t, "Sin", OpKind::Sin, true);
  unary(t, "Cos", OpKind::Cos, true);
  unary(t, "Tanh", OpKind::Tanh, true);
  unary(t, "Sigmoid", OpKind::Sigmoid, true);
  unary(t, "Relu", OpKind::Relu, false);
  unary(t, "Erf", OpKind::Erf, true);
  unary(t, "Floor", OpKind::Floor, false);
  unary(t, "Ceil", OpKind::Ceil, false);
  unary(t, "Round", OpKind::Round, false);
  unary(t, "Sign", OpKind::Sign, false);
  unary(t, "Reciprocal", OpKind::Reciprocal, true);
  unary(t, "Not", OpKind::LogicalNot, false);

  t["LeakyRelu"] = [](N& n) {
    n.set_output(0, n.emit(OpKind::LeakyRelu, {n.input(0)}, {{"alpha", n.attr_float("alpha", 0.01)}}));
  };
  t["Elu"] = [](N& n) {
    n.set_output(0, n.emit(OpKind::Elu, {n.input(0)}, {{"alpha", n.attr_float("alpha", 1.0)}}));
  };
  t["Selu"] = [](N& n) {
    Value* x = n.input(0);
    Value* e = n.emit(OpKind::Elu, {x}, {{"alpha", n.attr_float("alpha", 1.67326319217681884765625)}});
    n.set_output(0, n.emit(OpKind::Mul, {e, scalar_like(n, n.attr_float("gamma", 1.05070102214813232421875), x)}));
  };
  t["Celu"] = [](N& n) {  // max(0,x) + min(0, alpha*(exp(x/alpha)-1)) == elu(x/alpha)*alpha
    Value* x = n.input(0);
    const double alpha = n.attr_float("alpha", 1.0);
    Value* e = n.emit(OpKind::Elu, {n.emit(OpKind::Div, {x, scalar_like(n, alpha, x)})}, {{"alpha", 1.0}});
    n.set_output(0, n.emit(OpKind::Mul, {e, scalar_like(n, alpha, x)}));
  };
  t["HardSigmoid"] = [](N& n) {
    Value* x = n.input(0);
    Value* y = n.emit(OpKind::Mul, {x, scalar_like(n, n.attr_float("alpha", 0.2), x)});
    y = n.emit(OpKind::Add, {y, scalar_like(n, n.attr_float("beta", 0.5), x)});
    n.set_output(0, n.emit(OpKind::Clip, {y}, {{"min", 0.0}, {"max", 1.0}}));
  };
  t["HardSwish"] = [](N& n) {
    Value* x = n.input(0);
    Value* y = n.emit(OpKind::Mul, {x, scalar_like(n, 1.0 / 6.0, x)});
    y = n.emit(OpKind::Add, {y, scalar_like(n, 0.5, x)});
    y = n.emit(OpKind::Clip, {y}, {{"min", 0.0}, {"max", 1.0}});
    n.set_output(0, n.emit(OpKind::Mul, {x, y}));
  };
  t["Softplus"] = [](N& n) { require_float(n); n.set_output(0, softplus(n, n.input(0))); };
  t["Softsign"] = [](N& n) {
    Value* x = n.input(0);
    Value* d = n.emit(OpKind::Add, {n.emit(OpKind::Abs, {x}), scalar_like(n, 1, x)});
    n.set_output(0, n.emit(OpKind::Div, {x, d}));
  };
  t["Mish"] = [](N& n) {
    require_float(n);
    Value* x = n.input(0);
    n.set_output(0, n.emit(OpKind::Mul, {x, n.emit(OpKind::Tanh, {softplus(n, x)})}));
  };
  t["ThresholdedRelu"] = [](N& n) {
    Value* x = n.input(0);
    Value* keep = n.emit(OpKind::Gt, {x, scalar_like(n, n.attr_float("alpha", 1.0), x)});
    n.set_output(0, n.emit(OpKind::Where, {keep, x, scalar_like(n, 0, x)}));
  };
  t["PRelu"] = [](N& n) {
    Value* x = n.input(0);
    Value* slope = n.input(1);
    // Old exporters give one slope per channel ([C]) for [N, C, ...]: align it with dim 1.
    const Shape& xs = x->type.shape;
    if (!broadcast_shapes(xs, slope->type.shape) && slope->type.rank() == 1 && xs.size() > 2 &&
        slope->type.shape[0].same_as(xs[1])) {
      Shape s(xs.size() - 1, SymInt(1));
      s[0] = xs[1];
      slope = n.reshape(slope, s);
    }
    Value* neg = n.emit(OpKind::Lt, {x, scalar_like(n, 0, x)});
    n.set_output(0, n.emit(OpKind::Where, {neg, n.emit(OpKind::Mul, {x, slope}), x}));
  };
  t["Tan"] = [](N& n) {
    require_float(n);
    Value* x = n.input(0);
    n.set_output(0, n.emit(OpKind::Div, {n.emit(OpKind::Sin, {x}), n.emit(OpKind::Cos, {x})}));
  };
  auto hyperbolic = [](bool sinh) {
    return [sinh](N& n) {
      require_float(n);
      Value* x = n.input(0);
      Value* a = n.emit(OpKind::Exp, {x});
      Value* b = n.emit(OpKind::Exp, {n.emit(OpKind::Neg, {x})});
      Value* s = n.emit(sinh ? OpKind::Sub : OpKind::Add, {a, b});
      n.set_output(0, n.emit(OpKind::Mul, {s, scalar_like(n, 0.5, x)}));
    };
  };
  t["Sinh"] = hyperbolic(true);
  t["Cosh"] = hyperbolic(false);
  t["Asinh"] = [](N& n) {  // log(x + sqrt(x^2 + 1))
    require_float(n);
    Value* x = n.input(0);
    Value* r = n.emit(OpKind::Sqrt, {n.emit(OpKind::Add, {n.emit(OpKind::Mul, {x, x}), scalar_like(n, 1, x)})});
    n.set_output(0, n.emit(OpKind::Log, {n.emit(OpKind::Add, {x, r})}));
  };
  t["Acosh"] = [](N& n) {  // log(x + sqrt(x^2 - 1))
    require_float(n);
    Value* x = n.input(0);
    Value* r = n.emit(OpKind::Sqrt, {n.emit(OpKind::Sub, {n.emit(OpKind::Mul, {x, x}), scalar_like(n, 1, x)})});
    n.set_output(0, n.emit(OpKind::Log, {n.emit(OpKind::Add, {x, r})}));
  };
  t["Atanh"] = [](N& n) {  // 0.5 * log((1 + x) / (1 - x))
    require_float(n);
    Value* x = n.input(0);
    Value* one = scalar_like(n, 1, x);
    Value* q = n.emit(OpKind::Div, {n.emit(OpKind::Add, {one, x}), n.emit(OpKind::Sub, {one, x})});
    n.set_output(0, n.emit(OpKind::Mul, {n.emit(OpKind::Log, {q}), scalar_like(n, 0.5, x)}));
  };
  t["Atan"] = [](N& n) { require_float(n); n.set_output(0, atan_of(n, n.input(0))); };
  t["Asin"] = [](N& n) { require_float(n); n.set_output(0, asin_of(n, n.input(0))); };
  t["Acos"] = [](N& n) {
    require_float(n);
    Value* x = n.input(0);
    n.set_output(0, n.emit(OpKind::Sub, {n.scalar(M_PI / 2, x->type.dtype), asin_of(n, x)}));
  };
  t["IsNaN"] = [](N& n) {
    Value* x = n.input(0);
    n.set_output(0, n.emit(OpKind::Ne, {x, x}));
  };
  t["IsInf"] = [](N& n) {
    Value* x = n.input(0);
    const double inf = std::numeric_limits<double>::infinity();
    const bool pos = n.attr_int("detect_positive", 1), neg = n.attr_int("detect_negative", 1);
    Value* p = n.emit(OpKind::Eq, {x, scalar_like(n, inf, x)});
    Value* m = n.emit(OpKind::Eq, {x, scalar_like(n, -inf, x)});
    Value* r = pos && neg ? n.emit(OpKind::LogicalOr, {p, m})
               : pos      ? p
               : neg      ? m
                          : n.emit(OpKind::LogicalAnd, {p, m});
    n.set_output(0, r);
  };

  binary(t, "Add", OpKind::Add);
  binary(t, "Sub", OpKind::Sub);
  binary(t, "Mul", OpKind::Mul);
  binary(t, "Div", OpKind::Div);
  binary(t, "Pow", OpKind::Pow);
  binary(t, "Equal", OpKind::Eq);
  binary(t, "Less", OpKind::Lt);
  binary(t, "LessOrEqual", OpKind::Le);
  binary(t, "Greater", OpKind::Gt);
  binary(t, "GreaterOrEqual", OpKind::Ge);
  binary(t, "And", OpKind::LogicalAnd);
  binary(t, "Or", OpKind::LogicalOr);
  binary(t, "Xor", OpKind::LogicalXor);
  t["Mod"] = [](N& n) {
    n.set_output(0, n.emit(OpKind::Mod, {n.input(0), n.input(1)},
                           {{"fmod", bool(n.attr_int("fmod", 0))}}));
  };
  t["BitShift"] = map_bit_shift;
  variadic(t, "Max", OpKind::Maximum, false);
  variadic(t, "Min", OpKind::Minimum, false);
  variadic(t, "Sum", OpKind::Add, false);
  variadic(t, "Mean", OpKind::Add, true);
  t["Where"] = [](N& n) {
    n.set_output(0, n.emit(OpKind::Where, {n.input(0), n.input(1), n.input(2)}));
  };
  t["Clip"] = map_clip;
  t["Cast"] = [](N& n) { map_cast(n, cast_target(n)); };
  t["CastLike"] = [](N& n) { map_cast(n, n.input_type(1).dtype); };
  t["Identity"] = [](N& n) { n.set_output(0, n.input(0)); };
  t["Dropout"] = [](N& n) {  // inference: identity; the mask is all true
    if (n.has_input(2)) {
      const Literal& training = n.require_constant(2, "training_mode");
      // Training with ratio 0 drops nothing, so it is the identity too.
      const bool train = training.numel() > 0 && training.element(0) != 0;
      const bool drops = !n.has_input(1) || n.require_constant(1, "ratio").element(0) != 0;
      if (train && drops)
        n.unsupported("training_mode=true (kiln imports models for inference)");
    }
    Value* x = n.input(0);
    n.set_output(0, x);
    if (n.has_output(1)) {
      Literal mask;
      mask.dtype = DType::Bool;
      mask.shape = static_dims(x->type.shape);
      mask.bytes.assign(size_t(mask.numel()), 1);
      n.set_output(1, n.constant_value(mask));
    }
  };
}

}  // namespace kiln::onnx::detail
