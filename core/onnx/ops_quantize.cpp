// ONNX's quantized ops -> kiln ops in f32: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv. Integers less
// their zero points are exact in f32 while partial sums stay below 2^24; quantizing rounds half to
// even and saturates to the output type, as the ONNX reference does.
#include <limits>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;

// A 1-D operand of several elements reshaped to run along `axis` of `like` (axis -1: as is).
Value* per_channel(N& n, Value* c, Value* like, int64_t axis) {
  if (axis < 0 || c->type.rank() != 1 || !c->type.shape[0].is_static() || c->type.shape[0].value() == 1)
    return c;
  const int64_t rank = int64_t(like->type.rank());
  axis = normalize_axis_or(n, axis, rank);
  Shape shape(size_t(rank), SymInt(1));
  shape[size_t(axis)] = c->type.shape[0];
  return n.reshape(c, shape);
}

// Input `i` as f32, lined up with `axis` of `like`.
Value* f32_along(N& n, size_t i, Value* like, int64_t axis) {
  return per_channel(n, n.cast(n.input(i), DType::F32), like, axis);
}

// Input `i` as f32 less its zero point (input `zp_i`); a 1-D per-channel zero point lines up with
// `axis`.
Value* minus_zero_point(N& n, size_t i, size_t zp_i, int64_t axis) {
  Value* v = n.cast(n.input(i), DType::F32);
  if (!n.has_input(zp_i)) return v;
  return n.emit(OpKind::Sub, {v, f32_along(n, zp_i, v, axis)});
}

// round(scaled) + zero point, saturated to `out`'s range and cast to it.
Value* quantize(N& n, Value* scaled, Value* zero_point, DType out) {
  if (!is_integral(out)) n.unsupported("quantizing to " + std::string(dtype_name(out)));
  Value* q = n.emit(OpKind::Round, {scaled});
  if (zero_point) q = n.emit(OpKind::Add, {q, zero_point});
  double lo = 0, hi = 0;
  visit_dtype(out, [&]<class T>() {
    lo = double(std::numeric_limits<T>::lowest());
    hi = double(std::numeric_limits<T>::max());
  });
  return n.cast(n.emit(OpKind::Clip, {q}, {{"min", lo}, {"max", hi}}), out);
}

// The output type of a quantizing op: its zero point's, else output_dtype (opset 21), else u8.
DType quantized_type(N& n, size_t zp_i) {
  if (n.has_input(zp_i)) return n.input_type(zp_i).dtype;
  DType dt = DType::U8;
  if (n.has_attr("output_dtype") && n.attr_int("output_dtype", 0) != 0 &&
      !dtype_from_onnx(int(n.attr_int("output_dtype", 0)), &dt))
    n.unsupported("output_dtype " + onnx_type_name(int(n.attr_int("output_dtype", 0))));
  return dt;
}

void map_quantize(N& n) {
  n.require_attr_int("block_size", 0);
  const int64_t axis = n.attr_int("axis", 1);
  Value* x = n.cast(n.input(0), DType::F32);
  Value* scaled = n.emit(OpKind::Div, {x, f32_along(n, 1, x, axis)});
  Value* zp = n.has_input(2) ? f32_along(n, 2, x, axis) : nullptr;
  n.set_output(0, quantize(n, scaled, zp, quantized_type(n, 2)));
}

void map_dequantize(N& n) {
  n.require_attr_int("block_size", 0);
  const int64_t axis = n.attr_int("axis", 1);
  Value* v = minus_zero_point(n, 0, 2, axis);
  n.set_output(0, n.emit(OpKind::Mul, {v, f32_along(n, 1, v, axis)}));
}

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = saturate(round(-min(x, 0) / y_scale)),
// y = saturate(round(x / y_scale) + y_zero_point), all u8.
void map_dynamic_quantize(N& n) {
  Value* x = n.cast(n.input(0), DType::F32);
  const AttrMap all{{"dims", std::vector<int64_t>{}}, {"keepdim", false}};
  Value* zero = n.scalar(0, DType::F32);
  Value* lo = n.emit(OpKind::Minimum, {n.emit(OpKind::ReduceMin, {x}, all), zero});
  Value* hi = n.emit(OpKind::Maximum, {n.emit(OpKind::ReduceMax, {x}, all), zero});
  Value* scale = n.emit(OpKind::Div, {n.emit(OpKind::Sub, {hi, lo}), n.scalar(255, DType::F32)});
  Value* zp = quantize(n, n.emit(OpKind::Neg, {n.emit(OpKind::Div, {lo, scale})}), nullptr, DType::U8);
  Value* y = quantize(n, n.emit(OpKind::Div, {x, scale}), n.cast(zp, DType::F32), DType::U8);
  n.set_output(0, y);
  if (n.has_output(1)) n.set_output(1, scale);
  if (n.has_output(2)) n.set_output(2, zp);
}

void map_conv_integer(N& n) {
  Value* xf = minus_zero_point(n, 0, 2, -1);
  Value* wf = minus_zero_point(n, 1, 3, 0);
  n.set_output(0, n.cast(n.emit(OpKind::Conv, {xf, wf}, conv_attributes(n, 0, 1)), DType::I32));
}

void map_matmul_integer(N& n) {
  const int64_t ra = int64_t(n.input_type(0).rank());
  Value* af = minus_zero_point(n, 0, 2, ra - 2);  // per-row zero points
  Value* bf = minus_zero_point(n, 1, 3, -1);      // per-column: broadcasts as is
  n.set_output(0, n.cast(n.emit(OpKind::MatMul, {af, bf}), DType::I32));
}

// Inputs a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point: the integer
// product times a_scale * b_scale / y_scale, quantized.
void map_qlinear_matmul(N& n) {
  const int64_t ra = int64_t(n.input_type(0).rank());
  Value* acc = n.emit(OpKind::MatMul, {minus_zero_point(n, 0, 2, ra - 2), minus_zero_point(n, 3, 5, -1)});
  const int64_t rows = int64_t(acc->type.rank()) - 2;
  Value* multiplier = n.emit(OpKind::Mul, {f32_along(n, 1, acc, rows), f32_along(n, 4, acc, -1)});
  multiplier = n.emit(OpKind::Div, {multiplier, f32_along(n, 6, acc, -1)});
  Value* zp = n.has_input(7) ? f32_along(n, 7, acc, -1) : nullptr;
  n.set_output(0, quantize(n, n.emit(OpKind::Mul, {acc, multiplier}), zp, quantized_type(n, 7)));
}

// Inputs x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point and an int32
// bias: (conv of the integers + bias) times x_scale * w_scale / y_scale, quantized. w's scale and
// zero point may be per output channel.
void map_qlinear_conv(N& n) {
  std::vector<Value*> in = {minus_zero_point(n, 0, 2, -1), minus_zero_point(n, 3, 5, 0)};
  if (n.has_input(8)) in.push_back(n.cast(n.input(8), DType::F32));
  Value* acc = n.emit(OpKind::Conv, in, conv_attributes(n, 0, 3));
  Value* multiplier = n.emit(OpKind::Mul, {f32_along(n, 1, acc, -1), f32_along(n, 4, acc, 1)});
  multiplier = n.emit(OpKind::Div, {multiplier, f32_along(n, 6, acc, -1)});
  Value* zp = n.has_input(7) ? f32_along(n, 7, acc, -1) : nullptr;
  n.set_output(0, quantize(n, n.emit(OpKind::Mul, {acc, multiplier}), zp, quantized_type(n, 7)));
}

}  // namespace

void register_quantize_ops(OpTable& t) {
  t["QuantizeLinear"] = map_quantize;
  t["DequantizeLinear"] = map_dequantize;
  t["DynamicQuantizeLinear"] = map_dynamic_quantize;
  t["ConvInteger"] = map_conv_integer;
  t["MatMulInteger"] = map_matmul_integer;
  t["QLinearMatMul"] = map_qlinear_matmul;
  t["QLinearConv"] = map_qlinear_conv;
}

}  // namespace kiln::onnx::detail
