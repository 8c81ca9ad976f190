// ONNX Resize/Upsample as one constant interpolation matrix per resized axis (nearest, linear and
// cubic are all separable), applied with a matmul; Einsum as broadcast multiply + sum; TopK as k
// rounds of argmax/argmin with the picked elements masked out. Dims that Resize keeps (a dynamic
// batch) may be symbolic.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

Ints static_dims_of(N& n, const TensorType& t, const std::string& why) {
  if (!is_static(t.shape)) n.unsupported(why + " of a tensor with symbolic dims " + t.str());
  return static_dims(t.shape);
}

Literal f64_literal(const std::vector<double>& v, Ints shape, DType dtype) {
  Literal lit{dtype, std::move(shape), std::vector<uint8_t>(v.size() * dtype_size(dtype))};
  if (!v.empty()) convert_elements(v.data(), DType::F64, lit.bytes.data(), dtype, v.size());
  return lit;
}

Literal i64_literal(const Ints& v, Ints shape) {
  Literal lit{DType::I64, std::move(shape), std::vector<uint8_t>(v.size() * 8)};
  if (!v.empty()) std::memcpy(lit.bytes.data(), v.data(), v.size() * 8);
  return lit;
}

// How one axis is resampled: out[o] = sum_i weight[o][i] * in[i] + bias[o].
struct AxisMap {
  std::vector<double> weight;  // [out, in]
  std::vector<double> bias;    // [out]
};

struct ResizeSpec {
  std::string mode = "nearest";        // nearest | linear | cubic
  std::string coord = "half_pixel";    // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// Tap weights for the fraction `ratio` in (0, 1] past the left tap (the ONNX reference's rules).
std::vector<double> tap_coeffs(const ResizeSpec& spec, double ratio) {
  if (spec.mode == "linear") return {1 - ratio, ratio};
  if (spec.mode == "cubic") {
    const double A = spec.cubic_a, r = ratio, q = 1 - ratio;
    return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
            ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * q - (A + 3)) * q * q + 1,
            ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
  }
  if (ratio == 1) return {0, 1};
  const std::string& m = spec.nearest;
  if (m == "round_prefer_floor") return {double(ratio <= 0.5), double(ratio > 0.5)};
  if (m == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
  if (m == "floor") return {1, 0};
  return {0, 1};  // ceil
}

AxisMap axis_map(const ResizeSpec& spec, int64_t in, int64_t out, double scale, double roi_lo,
                 double roi_hi) {
  AxisMap m{std::vector<double>(size_t(out * in), 0.0), std::vector<double>(size_t(out), 0.0)};
  const double out_width = scale * double(in);  // the reference uses the unrounded width
  for (int64_t o = 0; o < out; ++o) {
    const double x = double(o);
    double xo;
    const std::string& c = spec.coord;
    if (c == "align_corners") {
      xo = out_width == 1 ? 0.0 : x * double(in - 1) / (out_width - 1);
    } else if (c == "asymmetric") {
      xo = x / scale;
    } else if (c == "tf_crop_and_resize") {
      xo = out_width == 1 ? (roi_hi - roi_lo) * double(in - 1) / 2
                          : x * (roi_hi - roi_lo) * double(in - 1) / (out_width - 1);
      xo += roi_lo * double(in - 1);
      if (xo < 0 || xo > double(in - 1)) {
        m.bias[size_t(o)] = spec.extrapolation;
        continue;
      }
    } else if (c == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else if (c == "pytorch_half_pixel") {
      xo = out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else {  // half_pixel
      xo = (x + 0.5) / scale - 0.5;
    }
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    std::vector<double> coeffs = tap_coeffs(spec, ratio);
    const int64_t taps = int64_t(coeffs.size());
    const int64_t left = int64_t(std::llround(xo - ratio)) - taps / 2 + 1;
    if (spec.exclude_outside) {
      double total = 0;
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t idx = left + k;
        if (idx < 0 || idx >= in) coeffs[size_t(k)] = 0;
        total += coeffs[size_t(k)];
      }
      if (total != 0)
        for (double& cf : coeffs) cf /= total;
    }
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t idx = std::clamp<int64_t>(left + k, 0, in - 1);  // edge padding
      m.weight[size_t(o * in + idx)] += coeffs[size_t(k)];
    }
  }
  return m;
}

bool is_identity(const AxisMap& m, int64_t in, int64_t out) {
  if (in != out) return false;
  for (int64_t o = 0; o < out; ++o) {
    if (m.bias[size_t(o)] != 0) return false;
    for (int64_t i = 0; i < in; ++i)
      if (m.weight[size_t(o * in + i)] != (o == i ? 1.0 : 0.0)) return false;
  }
  return true;
}

// Applies `m` along `axis` of x (a static dim of `dims`): permute the axis last, matmul, permute
// back. The other dims may be symbolic.
Value* apply_axis_map(N& n, Value* x, Shape& dims, int64_t axis, const AxisMap& m, int64_t out) {
  const int64_t rank = int64_t(dims.size()), in = dims[size_t(axis)].value();
  const DType dt = x->type.dtype;
  Ints perm;
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  Shape moved;
  SymInt rows = 1;
  for (int64_t p : perm) moved.push_back(dims[size_t(p)]);
  for (size_t i = 0; i + 1 < moved.size(); ++i) rows = rows * moved[i];
  Value* y = rank == 1 ? x : n.emit(OpKind::Permute, {x}, {{"dims", perm}});
  y = n.reshape(y, {rows, in});
  std::vector<double> wt(size_t(in * out));  // transposed: [in, out]
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) wt[size_t(i * out + o)] = m.weight[size_t(o * in + i)];
  y = n.emit(OpKind::MatMul, {y, n.constant_value(f64_literal(wt, {in, out}, dt))});
  if (std::any_of(m.bias.begin(), m.bias.end(), [](double b) { return b != 0; }))
    y = n.emit(OpKind::Add, {y, n.constant_value(f64_literal(m.bias, {out}, dt))});
  moved.back() = out;
  y = n.reshape(y, moved);
  Ints inverse(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) inverse[size_t(perm[size_t(i)])] = i;
  if (rank > 1) y = n.emit(OpKind::Permute, {y}, {{"dims", inverse}});
  dims[size_t(axis)] = out;
  return y;
}

// A dim of size `d` resized to `to` (a symbolic dim can only keep its size).
void check_resizable(N& n, const SymInt& d, const SymInt& to) {
  if (!d.is_static() || !to.is_static())
    n.unsupported("Resize of the symbolic dim " + d.str() + " to " + to.str() +
                  " (kiln resizes static dims; symbolic ones keep their size)");
}

Value* resize(N& n, Value* x, const ResizeSpec& spec, std::vector<double> scales, Shape sizes,
              const std::vector<double>& roi) {
  if (!is_floating(x->type.dtype)) n.unsupported("non-float input");
  Shape dims = x->type.shape;
  const int64_t rank = int64_t(dims.size());
  if (spec.mode != "nearest" && spec.mode != "linear" && spec.mode != "cubic")
    n.fail("unknown mode '" + spec.mode + "'");
  static const char* kCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                  "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoords), std::end(kCoords), spec.coord) == std::end(kCoords))
    n.unsupported("coordinate_transformation_mode '" + spec.coord + "'");
  Shape out(dims);
  if (!sizes.empty()) {
    if (int64_t(sizes.size()) != rank) n.fail("sizes needs one value per input dim");
    scales.assign(size_t(rank), 1.0);
    for (int64_t i = 0; i < rank; ++i) {
      out[size_t(i)] = sizes[size_t(i)];
      if (sizes[size_t(i)].same_as(dims[size_t(i)])) continue;
      check_resizable(n, dims[size_t(i)], sizes[size_t(i)]);
      scales[size_t(i)] = double(sizes[size_t(i)].value()) / double(dims[size_t(i)].value());
    }
  } else {
    if (int64_t(scales.size()) != rank) n.fail("scales needs one value per input dim");
    for (int64_t i = 0; i < rank; ++i) {
      if (scales[size_t(i)] <= 0) n.fail("scales must be positive");
      if (!dims[size_t(i)].is_static()) {
        if (scales[size_t(i)] == 1.0) continue;
        n.unsupported("Resize of the symbolic dim " + dims[size_t(i)].str() + " by scale " +
                      std::to_string(scales[size_t(i)]) + " (kiln resizes static dims)");
      }
      out[size_t(i)] = int64_t(scales[size_t(i)] * double(dims[size_t(i)].value()));
    }
  }
  if (spec.coord == "tf_crop_and_resize" && int64_t(roi.size()) != 2 * rank)
    n.fail("tf_crop_and_resize needs an roi of 2 * rank values");
  // Innermost axis first, so extrapolated values flow outward as in the reference's recursion.
  for (int64_t a = rank - 1; a >= 0; --a) {
    const double lo = roi.empty() ? 0 : roi[size_t(a)], hi = roi.empty() ? 1 : roi[size_t(a + rank)];
    if (!dims[size_t(a)].is_static()) {  // kept size: the identity unless an roi crops it
      if (lo != 0 || hi != 1) n.unsupported("an roi that crops the symbolic dim " + dims[size_t(a)].str());
      continue;
    }
    const int64_t in = dims[size_t(a)].value(), to = out[size_t(a)].value();
    AxisMap m = axis_map(spec, in, to, scales[size_t(a)], lo, hi);
    if (is_identity(m, in, to)) continue;
    x = apply_axis_map(n, x, dims, a, m, to);
  }
  return x;
}

void map_resize(N& n) {
  ResizeSpec spec;
  spec.mode = n.attr_string("mode", "nearest");
  if (n.attr_int("antialias", 0)) n.unsupported("antialias=1");
  if (n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    n.unsupported("keep_aspect_ratio_policy other than stretch");
  std::vector<double> scales, roi;
  Shape sizes;
  if (n.opset() < 11) {  // Resize-10: X, scales; asymmetric coordinates, floor for nearest
    spec.coord = "asymmetric";
    spec.nearest = "floor";
    scales = n.constant_floats(1, "scales");
  } else {
    spec.coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
    spec.nearest = n.attr_string("nearest_mode", "round_prefer_floor");
    spec.cubic_a = n.attr_float("cubic_coeff_a", -0.75);
    spec.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
    spec.extrapolation = n.attr_float("extrapolation_value", 0.0);
    if (n.has_input(1) && spec.coord == "tf_crop_and_resize") roi = n.constant_floats(1, "roi");
    if (n.has_input(2)) scales = n.constant_floats(2, "scales");
    if (n.has_input(3)) sizes = n.sym_ints(3, "sizes");
    if (!scales.empty() && !sizes.empty()) n.fail("give scales or sizes, not both");
    if (scales.empty() && sizes.empty()) n.fail("needs scales or sizes");
  }
  const int64_t rank = int64_t(n.input_type(0).rank());
  const Ints axes = n.attr_ints("axes");
  if (!axes.empty()) {  // opset 18: scales/sizes/roi name only these axes
    const Ints dims = static_dims_of(n, n.input_type(0), "Resize");
    std::vector<double> full_scales(size_t(rank), 1.0), full_roi;
    Shape full_sizes = make_shape(dims);
    if (!roi.empty()) {
      full_roi.assign(size_t(2 * rank), 0.0);
      for (int64_t i = 0; i < rank; ++i) full_roi[size_t(rank + i)] = 1.0;
    }
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t a = normalize_axis_or(n, axes[k], rank);
      if (!scales.empty()) full_scales[size_t(a)] = scales.at(k);
      if (!sizes.empty()) full_sizes[size_t(a)] = sizes.at(k);
      if (!roi.empty()) {
        full_roi[size_t(a)] = roi.at(k);
        full_roi[size_t(rank + a)] = roi.at(axes.size() + k);
      }
    }
    if (!scales.empty()) scales = full_scales;
    if (!sizes.empty()) sizes = full_sizes;
    roi = full_roi;
  }
  n.set_output(0, resize(n, n.input(0), spec, scales, sizes, roi));
}

void map_upsample(N& n) {
  ResizeSpec spec;
  spec.mode = n.attr_string("mode", "nearest");
  if (spec.mode == "bilinear") spec.mode = "linear";
  if (spec.mode != "nearest" && spec.mode != "linear") n.fail("unknown mode '" + spec.mode + "'");
  spec.coord = "asymmetric";
  spec.nearest = "floor";
  const std::vector<double> scales =
      n.opset() < 9 ? n.attr_floats("scales") : n.constant_floats(1, "scales");
  n.set_output(0, resize(n, n.input(0), spec, scales, {}, {}));
}

// Einsum with one or two operands: repeated letters in one term take the diagonal (eye mask + sum),
// then every operand is laid out in [output letters..., summed letters...], multiplied with
// broadcasting and summed over the trailing letters.
void map_einsum(N& n) {
  std::string eq;
  for (char ch : n.attr_string("equation", "")) if (ch != ' ') eq.push_back(ch);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t b = 0;;) {
    const size_t comma = lhs.find(',', b);
    terms.push_back(lhs.substr(b, comma == std::string::npos ? std::string::npos : comma - b));
    if (comma == std::string::npos) break;
    b = comma + 1;
  }
  if (terms.size() != n.num_inputs()) n.fail("equation names " + std::to_string(terms.size()) +
                                             " operands but the node has " + std::to_string(n.num_inputs()));
  if (terms.size() > 2) n.unsupported("more than 2 operands");
  // Ellipsis dims become the letters '0'.. (kept leading in implicit outputs).
  int64_t ell_rank = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    const size_t e = terms[t].find("...");
    if (e == std::string::npos) continue;
    const int64_t named = int64_t(terms[t].size()) - 3;
    const int64_t r = int64_t(n.input_type(t).rank()) - named;
    if (r < 0) n.fail("operand " + std::to_string(t) + " has too few dims for '" + terms[t] + "'");
    ell_rank = std::max(ell_rank, r);
  }
  auto expand = [&](const std::string& term, int64_t r) {
    const size_t e = term.find("...");
    if (e == std::string::npos) return term;
    std::string mid;
    for (int64_t i = ell_rank - r; i < ell_rank; ++i) mid.push_back(char('0' + i));
    return term.substr(0, e) + mid + term.substr(e + 3);
  };
  for (size_t t = 0; t < terms.size(); ++t) {
    const int64_t named = int64_t(terms[t].size()) - (terms[t].find("...") == std::string::npos ? 0 : 3);
    terms[t] = expand(terms[t], int64_t(n.input_type(t).rank()) - named);
    if (int64_t(terms[t].size()) != int64_t(n.input_type(t).rank()))
      n.fail("term '" + terms[t] + "' does not match operand rank " + std::to_string(n.input_type(t).rank()));
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = expand(eq.substr(arrow + 2), ell_rank);
  } else {
    std::map<char, int> count;
    for (auto& t : terms) for (char ch : t) ++count[ch];
    for (int64_t i = 0; i < ell_rank; ++i) out.push_back(char('0' + i));
    for (auto& [ch, c] : count) if (c == 1 && !std::isdigit(static_cast<unsigned char>(ch))) out.push_back(ch);
  }
  std::string order = out;
  for (auto& t : terms) for (char ch : t) if (order.find(ch) == std::string::npos) order.push_back(ch);

  Value* product = nullptr;
  for (size_t t = 0; t < terms.size(); ++t) {
    Value* v = n.input(t);
    std::string term = terms[t];
    Ints dims = static_dims_of(n, v->type, "Einsum");
    for (size_t q = 0; q < term.size(); ++q) {  // diagonals
      const size_t p = term.find(term[q]);
      if (p == q) continue;
      if (dims[p] != dims[q]) n.fail("repeated letter over dims of different sizes");
      Ints mshape(dims.size(), 1);
      mshape[p] = dims[p];
      mshape[q] = dims[q];
      Literal eye{DType::Bool, mshape, std::vector<uint8_t>(size_t(dims[p] * dims[q]))};
      for (int64_t i = 0; i < dims[p]; ++i) eye.bytes[size_t(i * dims[q] + i)] = 1;
      v = n.emit(OpKind::Where, {n.constant_value(eye), v, n.scalar(0, v->type.dtype)});
      v = n.emit(OpKind::Sum, {v}, {{"dims", Ints{int64_t(q)}}, {"keepdim", false}});
      term.erase(q, 1);
      dims.erase(dims.begin() + int64_t(q));
      --q;
    }
    Ints perm;
    Shape full;
    for (char ch : order) {
      const size_t at = term.find(ch);
      if (at != std::string::npos) perm.push_back(int64_t(at));
    }
    if (!perm.empty()) v = n.emit(OpKind::Permute, {v}, {{"dims", perm}});
    for (char ch : order) {
      const size_t at = term.find(ch);
      full.push_back(at == std::string::npos ? 1 : dims[at]);
    }
    v = n.reshape(v, full);
    product = product ? n.emit(OpKind::Mul, {product, v}) : v;
  }
  Ints summed;
  for (size_t i = out.size(); i < order.size(); ++i) summed.push_back(int64_t(i));
  if (!summed.empty()) product = n.emit(OpKind::Sum, {product}, {{"dims", summed}, {"keepdim", false}});
  n.set_output(0, product);
}

// TopK: k rounds of argmax (argmin for largest=0); each pick is masked out with -inf (+inf).
void map_topk(N& n) {
  Value* x = n.input(0);
  const Ints dims = static_dims_of(n, x->type, "TopK");
  const int64_t rank = int64_t(dims.size());
  const int64_t axis = normalize_axis_or(n, n.attr_int("axis", -1), rank);
  const int64_t k = n.opset() < 10 ? n.attr_int("k", 0) : n.constant_ints(1, "K").at(0);
  const bool largest = n.attr_int("largest", 1) != 0;
  // sorted=0 leaves the order open, so the sorted result below serves it too.
  if (k < 0 || k > dims[size_t(axis)]) n.fail("K is out of range for the axis");
  if (k == 0) n.unsupported("K = 0 (an empty result)");
  if (k > 64) n.unsupported("K > 64 (TopK unrolls one argmax per element)");
  const DType dt = x->type.dtype;
  const double fill = is_floating(dt) ? (largest ? -INFINITY : INFINITY)
                                      : (largest ? double(std::numeric_limits<int32_t>::min())
                                                 : double(std::numeric_limits<int32_t>::max()));
  Ints ishape(size_t(rank), 1);
  ishape[size_t(axis)] = dims[size_t(axis)];
  Ints io(static_cast<size_t>(dims[size_t(axis)]));
  for (size_t i = 0; i < io.size(); ++i) io[i] = int64_t(i);
  Value* positions = n.constant_value(i64_literal(io, ishape));
  Value* cur = x;
  std::vector<Value*> vals, idxs;
  for (int64_t r = 0; r < k; ++r) {
    Value* idx = n.cast(n.emit(largest ? OpKind::ArgMax : OpKind::ArgMin, {cur},
                               {{"dim", axis}, {"keepdim", true}}), DType::I64);
    idxs.push_back(idx);
    vals.push_back(n.emit(OpKind::Gather, {x, idx}, {{"dim", axis}}));
    if (r + 1 < k)
      cur = n.emit(OpKind::Where, {n.emit(OpKind::Eq, {positions, idx}), n.scalar(fill, dt), cur});
  }
  n.set_output(0, vals.size() == 1 ? vals[0] : n.emit(OpKind::Concat, vals, {{"dim", axis}}));
  if (n.has_output(1))
    n.set_output(1, idxs.size() == 1 ? idxs[0] : n.emit(OpKind::Concat, idxs, {{"dim", axis}}));
}

}  // namespace

void register_resize_ops(OpTable& t) {
  t["Resize"] = map_resize;
  t["Upsample"] = map_upsample;
  t["Einsum"] = map_einsum;
  t["TopK"] = map_topk;
}

}  // namespace kiln::onnx::detail
