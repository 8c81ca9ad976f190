// ONNX ops with no single kiln op, decomposed: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss,
// CumSum (masked sum), OneHot, Hardmax, Shrink, MeanVarianceNormalization, and the Hann/Hamming/
// Blackman windows (computed at import).
#include <cmath>
#include <cstring>
#include <numbers>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

Shape with_dim(Shape s, int64_t at, const SymInt& d) {
  s.insert(s.begin() + at, d);
  return s;
}

Ints iota(int64_t n) {
  Ints v(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

Literal i64_literal(const Ints& v, Ints shape) {
  Literal lit{DType::I64, std::move(shape), std::vector<uint8_t>(v.size() * 8)};
  if (!v.empty()) std::memcpy(lit.bytes.data(), v.data(), v.size() * 8);
  return lit;
}

// 0..n-1 shaped to broadcast along `axis` of a rank-`rank` tensor.
Value* arange_along(N& n, int64_t count, int64_t axis, int64_t rank) {
  Ints shape(size_t(rank), 1);
  shape[size_t(axis)] = count;
  return n.constant_value(i64_literal(iota(count), shape));
}

// NLL on log-probabilities `x` [N, C, d...] with integer `target` [N, d...].
Value* nll(N& n, Value* x, Value* target, Value* weight, const std::string& reduction) {
  if (!is_floating(x->type.dtype)) n.unsupported("non-float input");
  if (x->type.rank() < 2) n.fail("input must be [N, C, ...]");
  if (target->type.rank() + 1 != x->type.rank())
    n.fail("target " + target->type.str() + " must be [N, d...] for the input " + x->type.str());
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    n.fail("unknown reduction '" + reduction + "'");
  const DType dt = x->type.dtype;
  Value* t = target;
  Value* mask = nullptr;
  if (n.has_attr("ignore_index")) {
    Value* ii = n.scalar(double(n.attr_int("ignore_index", 0)), t->type.dtype);
    mask = n.emit(OpKind::Ne, {t, ii});
    t = n.emit(OpKind::Where, {mask, t, n.scalar(0, t->type.dtype)});
  }
  Value* picked = n.emit(OpKind::Gather, {x, n.reshape(t, with_dim(t->type.shape, 1, 1))}, {{"dim", int64_t(1)}});
  Value* loss = n.emit(OpKind::Neg, {n.reshape(picked, t->type.shape)});
  Value* w = weight ? n.emit(OpKind::IndexSelect, {weight, t}, {{"dim", int64_t(0)}}) : nullptr;
  if (mask) w = w ? n.emit(OpKind::Where, {mask, w, n.scalar(0, dt)}) : n.cast(mask, dt);
  if (w) loss = n.emit(OpKind::Mul, {loss, w});
  if (reduction == "none") return loss;
  Value* total = n.emit(OpKind::Sum, {loss});
  if (reduction == "sum") return total;
  if (w) return n.emit(OpKind::Div, {total, n.emit(OpKind::Sum, {w})});
  return n.emit(OpKind::Div, {total, n.scalar(double(numel(t->type.shape).hint()), dt)});
}

void map_nll(N& n) {
  n.set_output(0, nll(n, n.input(0), n.input(1), n.has_input(2) ? n.input(2) : nullptr,
                      n.attr_string("reduction", "mean")));
}

void map_sce(N& n) {
  Value* scores = n.input(0);
  if (!is_floating(scores->type.dtype)) n.unsupported("non-float scores");
  Value* log_prob = n.emit(OpKind::LogSoftmax, {scores}, {{"dim", int64_t(1)}});
  n.set_output(0, nll(n, log_prob, n.input(1), n.has_input(2) ? n.input(2) : nullptr,
                      n.attr_string("reduction", "mean")));
  n.set_output(1, log_prob);
}

// out[..., i] = sum over j of x[..., j] * M[j, i], M the (exclusive, reverse) prefix mask: j <= i
// (j < i exclusive; j >= i, j > i reversed), a band of i - j. Over a symbolic dim the mask is
// computed at run time.
void map_cumsum(N& n) {
  Value* x = n.input(0);
  const int64_t rank = int64_t(x->type.rank());
  const int64_t axis = normalize_axis_or(n, n.constant_ints(1, "axis").at(0), rank);
  const SymInt len = x->type.shape[size_t(axis)];
  const bool exclusive = n.attr_int("exclusive", 0), reverse = n.attr_int("reverse", 0);
  Value* band = reverse ? band_mask(n, len, len, exclusive ? -1 : 0, Band::Lower)
                        : band_mask(n, len, len, exclusive ? 1 : 0, Band::Upper);
  Value* mv = n.cast(band, x->type.dtype);  // [j, i]
  // x with a new dim after `axis`: [..., j, 1, ...]; mask shaped [j, i] at (axis, axis+1).
  Value* xe = n.reshape(x, with_dim(x->type.shape, axis + 1, 1));
  Shape mshape(size_t(rank + 1), SymInt(1));
  mshape[size_t(axis)] = len;
  mshape[size_t(axis + 1)] = len;
  Value* prod = n.emit(OpKind::Mul, {xe, n.reshape(mv, mshape)});
  Value* sum = n.emit(OpKind::Sum, {prod}, {{"dims", Ints{axis}}});
  n.set_output(0, n.cast(sum, x->type.dtype));
}

void map_one_hot(N& n) {
  Value* idx = n.input(0);
  const int64_t depth = int64_t(n.constant_floats(1, "depth").at(0));
  Value* values = n.input(2);
  const int64_t rank = int64_t(idx->type.rank()) + 1;
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", -1), rank);
  const DType it = idx->type.dtype;
  Value* neg = n.emit(OpKind::Lt, {idx, n.scalar(0, it)});
  idx = n.emit(OpKind::Where, {neg, n.emit(OpKind::Add, {idx, n.scalar(double(depth), it)}), idx});
  Value* hit = n.emit(OpKind::Eq, {n.reshape(idx, with_dim(idx->type.shape, axis, 1)),
                                   n.cast(arange_along(n, depth, axis, rank), it)});
  Value* off = n.reshape(n.emit(OpKind::Slice, {values}, {{"starts", Ints{0}}, {"ends", Ints{1}}}), {});
  Value* on = n.reshape(n.emit(OpKind::Slice, {values}, {{"starts", Ints{1}}, {"ends", Ints{2}}}), {});
  n.set_output(0, n.emit(OpKind::Where, {hit, on, off}));
}

void map_hardmax(N& n) {
  Value* x = n.input(0);
  const Shape shape = x->type.shape;
  const int64_t rank = int64_t(shape.size());
  int64_t axis = normalize_axis_or(n, n.attr_int("axis", n.opset() < 13 ? 1 : -1), rank);
  Value* v = x;
  if (n.opset() < 13) {  // flattened to [outer, inner]
    SymInt outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i)
      if (i < axis) outer = outer * shape[size_t(i)];
      else inner = inner * shape[size_t(i)];
    v = n.reshape(x, {outer, inner});
    axis = 1;
  }
  const SymInt& len = v->type.shape[size_t(axis)];
  if (!len.is_static()) n.unsupported("Hardmax over a symbolic dim");
  Value* arg = n.emit(OpKind::ArgMax, {v}, {{"dim", axis}, {"keepdim", true}});
  Value* hit = n.emit(OpKind::Eq, {arg, arange_along(n, len.value(), axis, int64_t(v->type.rank()))});
  n.set_output(0, n.reshape(n.cast(hit, x->type.dtype), shape));
}

void map_shrink(N& n) {
  Value* x = n.input(0);
  const DType dt = x->type.dtype;
  const double lambd = n.attr_float("lambd", 0.5), bias = n.attr_float("bias", 0.0);
  Value* lo = n.emit(OpKind::Lt, {x, n.scalar(-lambd, dt)});
  Value* hi = n.emit(OpKind::Gt, {x, n.scalar(lambd, dt)});
  Value* zero = n.scalar(0, dt);
  Value* y = n.emit(OpKind::Where, {hi, n.emit(OpKind::Sub, {x, n.scalar(bias, dt)}), zero});
  n.set_output(0, n.emit(OpKind::Where, {lo, n.emit(OpKind::Add, {x, n.scalar(bias, dt)}), y}));
}

void map_mvn(N& n) {
  Value* x = n.input(0);
  if (!is_floating(x->type.dtype)) n.unsupported("non-float input");
  Ints axes = n.attr_ints("axes", {0, 2, 3});
  for (int64_t& a : axes) a = normalize_axis_or(n, a, int64_t(x->type.rank()));
  const AttrMap a{{"dims", axes}, {"keepdim", true}};
  Value* mean = n.emit(OpKind::Mean, {x}, a);
  Value* mean_sq = n.emit(OpKind::Mean, {n.emit(OpKind::Mul, {x, x})}, a);
  Value* var = n.emit(OpKind::Sub, {mean_sq, n.emit(OpKind::Mul, {mean, mean})});
  Value* den = n.emit(OpKind::Sqrt, {n.emit(OpKind::Add, {var, n.scalar(1e-9, x->type.dtype)})});
  n.set_output(0, n.emit(OpKind::Div, {n.emit(OpKind::Sub, {x, mean}), den}));
}

// Generalized cosine windows: sum_k a_k cos(2 pi k n / N), N = size (periodic) or size - 1.
void map_window(N& n, std::vector<double> a) {
  const int64_t size = n.constant_ints(0, "size").at(0);
  if (size < 0) n.fail("size must be >= 0");
  const bool periodic = n.attr_int("periodic", 1) != 0;
  DType dt = DType::F32;
  if (!dtype_from_onnx(int(n.attr_int("output_datatype", 1)), &dt)) n.unsupported("output_datatype");
  const double denom = double(periodic ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k)
      v += a[k] * std::cos(2 * std::numbers::pi * double(k) * double(i) / denom);
    w[size_t(i)] = v;
  }
  Literal lit{dt, {size}, std::vector<uint8_t>(size_t(size) * dtype_size(dt))};
  convert_elements(w.data(), DType::F64, lit.bytes.data(), dt, w.size());
  n.set_output(0, n.constant_value(lit));
}

}  // namespace

void register_composite_ops(OpTable& t) {
  t["NegativeLogLikelihoodLoss"] = map_nll;
  t["SoftmaxCrossEntropyLoss"] = map_sce;
  t["CumSum"] = map_cumsum;
  t["OneHot"] = map_one_hot;
  t["Hardmax"] = map_hardmax;
  t["Shrink"] = map_shrink;
  t["MeanVarianceNormalization"] = map_mvn;
  t["HannWindow"] = [](N& n) { map_window(n, {0.5, -0.5}); };
  t["HammingWindow"] = [](N& n) { map_window(n, {25.0 / 46.0, -21.0 / 46.0}); };
  t["BlackmanWindow"] = [](N& n) { map_window(n, {0.42, -0.5, 0.08}); };
}

}  // namespace kiln::onnx::detail
