// Shape and dtype rules of the data-movement ops: constant, sym_ints, arange, rand_uniform, reshape,
// permute, slice, concat, split, gather, index_select, expand, pad, tile.
#include <algorithm>
#include <limits>

#include "core/ir/op.h"
#include "core/ir/ops/define_op.h"

namespace kiln::ops {
namespace {


std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Identical expressions are equal without asking; otherwise the comparison may record a guard.
bool dims_equal(const SymInt& a, const SymInt& b) { return a.same_as(b) || a == b; }

// A size as a static product times symbolic factors, so that s0*3*4 and s0*12 compare equal
// (and -1 resolves to 12) without a guard.
struct Factors {
  int64_t fixed = 1;
  std::vector<SymInt> symbolic;
};

Factors factor(const Shape& shape) {
  Factors f;
  for (const SymInt& d : shape) {
    if (d.is_static()) f.fixed *= d.value();
    else f.symbolic.push_back(d);
  }
  return f;
}

// Removes from `from` one factor per entry of `take`; false when some entry has no match.
bool cancel(std::vector<SymInt>& from, const std::vector<SymInt>& take) {
  for (const SymInt& t : take) {
    auto it = std::find_if(from.begin(), from.end(), [&](const SymInt& f) { return f.same_as(t); });
    if (it == from.end()) return false;
    from.erase(it);
  }
  return true;
}

SymInt product(int64_t fixed, const std::vector<SymInt>& symbolic) {
  SymInt p = fixed;
  for (const SymInt& s : symbolic) p = p * s;
  return p;
}

bool same_numel(const Shape& a, const Shape& b) {
  Factors fa = factor(a), fb = factor(b);
  std::vector<SymInt> rest_a = fa.symbolic, rest_b;
  for (const SymInt& s : fb.symbolic) {
    auto it = std::find_if(rest_a.begin(), rest_a.end(), [&](const SymInt& f) { return f.same_as(s); });
    if (it == rest_a.end()) rest_b.push_back(s);
    else rest_a.erase(it);
  }
  if (rest_a.empty() && rest_b.empty()) return fa.fixed == fb.fixed;
  return product(fa.fixed, rest_a) == product(fb.fixed, rest_b);
}

std::vector<TensorType> constant_rule(const InferContext& ctx) {
  const Literal& lit = ctx.attrs().get_tensor("value");
  if (int64_t(lit.bytes.size()) != lit.numel() * int64_t(dtype_size(lit.dtype)))
    ctx.fail("literal holds " + std::to_string(lit.bytes.size()) + " bytes, its type needs " +
             std::to_string(lit.numel() * int64_t(dtype_size(lit.dtype))));
  return {{lit.dtype, make_shape(lit.shape)}};
}

// Integers known as expressions of the graph's symbolic dims: a 0-d tensor for one value when
// `scalar`, else a 1-d tensor with one element per value.
std::vector<TensorType> sym_ints_rule(const InferContext& ctx) {
  const std::vector<SymInt>& values = ctx.attrs().get_syms("values");
  const DType dtype = ctx.attrs().get_dtype("dtype");
  if (dtype != DType::I32 && dtype != DType::I64) ctx.fail("dtype must be i32 or i64");
  if (!ctx.attrs().get_bool("scalar")) return {{dtype, {int64_t(values.size())}}};
  if (values.size() != 1)
    ctx.fail("a scalar holds one value, got " + std::to_string(values.size()));
  return {{dtype, {}}};
}

// start, start + step, ... : `count` values (a size, possibly symbolic) of `dtype`.
std::vector<TensorType> arange_rule(const InferContext& ctx) {
  const std::vector<SymInt>& count = ctx.attrs().get_syms("count");
  if (count.size() != 1) ctx.fail("count holds one size, got " + std::to_string(count.size()));
  if (count[0].is_static() && count[0].value() < 0) ctx.fail("count must not be negative");
  const DType dtype = ctx.attrs().get_dtype("dtype");
  if (dtype == DType::Bool) ctx.fail("dtype must be a number type");
  return {{dtype, {count[0]}}};
}

// Uniform values in (0, 1) of `shape`, element i of the stream its u64 scalar seed names
// (core/support/random.h); with `mix`, the input is a generator's counter and the stream is
// splitmix64 of it.
std::vector<TensorType> rand_uniform_rule(const InferContext& ctx) {
  const TensorType& seed = ctx.input(0);
  if (seed.dtype != DType::U64 || seed.rank() != 0) ctx.fail("the seed must be a u64 scalar, got " + seed.str());
  const Shape& shape = ctx.attrs().get_syms("shape");
  for (const SymInt& d : shape)
    if (d.is_static() && d.value() < 0) ctx.fail("negative size in shape " + shape_str(shape));
  return {{DType::F32, shape}};
}

std::vector<TensorType> reshape_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const Shape& target = ctx.attrs().get_syms("shape");
  Shape out = target;
  int64_t infer_at = -1;
  Factors known;  // the target without its -1
  for (size_t i = 0; i < target.size(); ++i) {
    const SymInt& d = target[i];
    if (!d.is_static()) {
      known.symbolic.push_back(d);
    } else if (d.value() == -1) {
      if (infer_at >= 0) ctx.fail("shape " + shape_str(target) + " has more than one -1");
      infer_at = int64_t(i);
    } else if (d.value() < 0) {
      ctx.fail("shape " + shape_str(target) + " has a negative size " + d.str() +
               "; only -1 (inferred) is allowed");
    } else if (__builtin_mul_overflow(known.fixed, d.value(), &known.fixed)) {
      ctx.fail("shape " + shape_str(target) + " has more elements than int64 counts");
    }
  }
  const std::string what = "cannot reshape " + shape_str(x.shape) + " (" +
                           numel(x.shape).str() + " elements) into " + shape_str(target);
  if (infer_at >= 0) {
    if (known.fixed == 0) ctx.fail(what + ": the -1 is ambiguous when the other sizes multiply to 0");
    Factors in = factor(x.shape);
    if (cancel(in.symbolic, known.symbolic) && in.fixed % known.fixed == 0) {
      out[size_t(infer_at)] = product(in.fixed / known.fixed, in.symbolic);
    } else {
      SymInt total = numel(x.shape), part = product(known.fixed, known.symbolic);
      if (part.hint() == 0 || total.hint() % part.hint() != 0)
        ctx.fail(what + ": " + total.str() + " elements do not divide into rows of " + part.str());
      out[size_t(infer_at)] = total / part;
    }
  }
  if (!same_numel(x.shape, out)) ctx.fail(what + " (" + numel(out).str() + " elements)");
  return {{x.dtype, out}};
}

std::vector<TensorType> permute_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const auto& dims = ctx.attrs().get_ints("dims");
  const int64_t rank = int64_t(x.rank());
  auto bad = [&] {
    ctx.fail("dims " + ints_str(dims) + " is not a permutation of the " + std::to_string(rank) +
             " dims of " + shape_str(x.shape));
  };
  if (int64_t(dims.size()) != rank) bad();
  std::vector<bool> seen(size_t(rank), false);
  Shape out;
  for (int64_t d : dims) {
    int64_t n = d < 0 ? d + rank : d;
    if (n < 0 || n >= rank || seen[size_t(n)]) bad();
    seen[size_t(n)] = true;
    out.push_back(x.shape[size_t(n)]);
  }
  return {{x.dtype, out}};
}

// Clamps v into [lo, hi]. Decisions on symbolic bounds become guards, except the ones known
// anyway: an open end exceeds every bound, and nothing <= 0 exceeds a size (`hi_is_size`).
SymInt clamp_sym(const SymInt& v, const SymInt& lo, const SymInt& hi, bool hi_is_size) {
  if (v.is_static() && v.value() == kSliceOpenBegin) return lo;
  if (v.is_static() && v.value() == kSliceOpenEnd) return hi;
  if (v < lo) return lo;
  if (hi_is_size && v.is_static() && v.value() <= 0) return v;
  if (v > hi) return hi;
  return v;
}

// ceil(span / step) for span > 0; the static form cannot overflow for a huge step.
SymInt steps_in(const SymInt& span, int64_t step) {
  if (span.is_static()) return (span.value() - 1) / step + 1;
  return (span + (step - 1)) / step;
}

// A slice bound: a negative one counts from the end. A symbolic bound's sign is a guard.
SymInt from_end(const SymInt& d, const SymInt& bound) {
  if (!bound.is_static()) return bound < 0 ? d + bound : bound;
  const int64_t b = bound.value();
  return b < 0 && b != kSliceOpenBegin ? d - (-b) : bound;
}

// ONNX Slice along a dim of size d, as numpy slices (the ONNX reference implementation):
// negative indices count from the end, then clamp into [0, d] for a positive step and [-1, d-1]
// for a negative one; the result may be empty.
SymInt slice_length(const SymInt& d, const SymInt& start, const SymInt& end, int64_t step) {
  SymInt s = from_end(d, start);
  SymInt e = from_end(d, end);
  if (step > 0) {
    s = clamp_sym(s, 0, d, true);
    e = clamp_sym(e, 0, d, true);
    if (s.is_static() && s.value() == 0 && step == 1) return e;
    if (!(e > s)) return 0;
    return steps_in(e - s, step);
  }
  s = clamp_sym(s, -1, d - 1, false);
  e = clamp_sym(e, -1, d - 1, false);
  if (!(s > e)) return 0;
  return steps_in(s - e, -step);
}

std::vector<TensorType> slice_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const auto& starts = ctx.attrs().get_syms("starts");
  const auto& ends = ctx.attrs().get_syms("ends");
  std::vector<int64_t> axes = ctx.attrs().get_ints("axes");
  std::vector<int64_t> steps = ctx.attrs().get_ints("steps");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("axes " + ints_str(axes) + ", starts " + shape_str(starts) + ", ends " +
             shape_str(ends) + " and steps " + ints_str(steps) + " must have the same length");
  const int64_t rank = int64_t(x.rank());
  if (rank == 0 && !axes.empty()) ctx.fail("cannot slice a 0-d tensor");
  Shape out = x.shape;
  std::vector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = ctx.axis(axes[i], rank);
    if (seen[size_t(axis)]) ctx.fail("axis " + std::to_string(axis) + " is sliced more than once");
    seen[size_t(axis)] = true;
    if (steps[i] == 0 || steps[i] == kSliceOpenBegin)
      ctx.fail("step must not be 0 or INT64_MIN (axis " + std::to_string(axis) + ")");
    out[size_t(axis)] = slice_length(x.shape[size_t(axis)], starts[i], ends[i], steps[i]);
  }
  return {{x.dtype, out}};
}

std::vector<TensorType> concat_rule(const InferContext& ctx) {
  const TensorType& first = ctx.input(0);
  const int64_t rank = int64_t(first.rank());
  if (rank == 0) ctx.fail("cannot concatenate 0-d tensors; unsqueeze them first");
  const int64_t dim = ctx.axis(ctx.attrs().get_int("dim"), rank);
  Shape out = first.shape;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    const std::string which =
        "input " + std::to_string(i) + " " + t.str() + " and input 0 " + first.str();
    if (t.dtype != first.dtype) ctx.fail(which + " differ in dtype; cast them to one dtype first");
    if (int64_t(t.rank()) != rank) ctx.fail(which + " differ in rank");
    for (int64_t k = 0; k < rank; ++k)
      if (k != dim && !dims_equal(t.shape[size_t(k)], first.shape[size_t(k)]))
        ctx.fail(which + " differ in dim " + std::to_string(k) + "; only dim " +
                 std::to_string(dim) + " (the concat dim) may differ");
    out[size_t(dim)] = out[size_t(dim)] + t.shape[size_t(dim)];
  }
  return {{first.dtype, out}};
}

std::vector<TensorType> split_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const int64_t rank = int64_t(x.rank());
  if (rank == 0) ctx.fail("cannot split a 0-d tensor");
  const int64_t dim = ctx.axis(ctx.attrs().get_int("dim"), rank);
  const auto& sizes = ctx.attrs().get_ints("sizes");
  if (sizes.empty()) ctx.fail("sizes must not be empty");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) ctx.fail("sizes " + ints_str(sizes) + " has a negative size");
    total += s;
  }
  if (!dims_equal(SymInt(total), x.shape[size_t(dim)]))
    ctx.fail("sizes " + ints_str(sizes) + " sum to " + std::to_string(total) + ", but dim " +
             std::to_string(dim) + " has size " + x.shape[size_t(dim)].str());
  std::vector<TensorType> outs;
  for (int64_t s : sizes) {
    TensorType t = x;
    t.shape[size_t(dim)] = s;
    outs.push_back(t);
  }
  return outs;
}

void check_index_dtype(const InferContext& ctx, const TensorType& index) {
  if (index.dtype != DType::I32 && index.dtype != DType::I64)
    ctx.fail("index must be i32 or i64, got " + index.str() + "; cast it first");
}

std::vector<TensorType> gather_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  check_index_dtype(ctx, index);
  if (index.rank() != x.rank())
    ctx.fail("index " + index.str() + " must have the same rank as the input " + x.str());
  const int64_t rank = int64_t(x.rank());
  const int64_t dim = ctx.axis(ctx.attrs().get_int("dim"), rank);
  for (int64_t k = 0; k < rank; ++k) {
    const SymInt& i = index.shape[size_t(k)];
    const SymInt& d = x.shape[size_t(k)];
    if (k != dim && !i.same_as(d) && i > d)
      ctx.fail("index " + index.str() + " is larger than the input " + x.str() + " in dim " +
               std::to_string(k) + " (only dim " + std::to_string(dim) + " may differ freely)");
  }
  return {{x.dtype, index.shape}};
}

std::vector<TensorType> index_select_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& index = ctx.input(1);
  check_index_dtype(ctx, index);
  const int64_t rank = int64_t(x.rank());
  if (rank == 0) ctx.fail("cannot select from a 0-d tensor");
  const int64_t dim = ctx.axis(ctx.attrs().get_int("dim"), rank);
  Shape out(x.shape.begin(), x.shape.begin() + dim);
  out.insert(out.end(), index.shape.begin(), index.shape.end());
  out.insert(out.end(), x.shape.begin() + dim + 1, x.shape.end());
  return {{x.dtype, out}};
}

// Broadcasts both ways (numpy / ONNX Expand); -1 in the target keeps the input's dim.
std::vector<TensorType> expand_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const Shape& target = ctx.attrs().get_syms("shape");
  const size_t rank = std::max(target.size(), x.rank());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const bool has_x = i < x.rank();
    const SymInt xd = has_x ? x.shape[x.rank() - 1 - i] : SymInt(1);
    const SymInt td = i < target.size() ? target[target.size() - 1 - i] : SymInt(1);
    auto is = [](const SymInt& s, int64_t v) { return s.is_static() && s.value() == v; };
    SymInt d;
    if (is(td, -1)) {
      if (!has_x)
        ctx.fail("shape " + shape_str(target) + " uses -1 for a new leading dim; give its size");
      d = xd;
    } else if (td.is_static() && td.value() < 0) {
      ctx.fail("shape " + shape_str(target) + " has a negative size " + td.str());
    } else if (td.same_as(xd) || is(td, 1)) {
      d = xd;
    } else if (is(xd, 1)) {
      d = td;
    } else if (dims_equal(xd, td)) {
      d = xd.is_static() ? xd : td;
    } else {
      ctx.fail("cannot expand " + shape_str(x.shape) + " to " + shape_str(target) + ": size " +
               xd.str() + " does not broadcast to " + td.str() + " (only size-1 dims expand)");
    }
    out[rank - 1 - i] = d;
  }
  return {{x.dtype, out}};
}

std::vector<TensorType> pad_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const auto& pads = ctx.attrs().get_ints("pads");
  const std::string& mode = ctx.attrs().get_string("mode");
  const size_t rank = x.rank();
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    ctx.fail("mode must be \"constant\", \"reflect\" or \"edge\", got \"" + mode + "\"");
  if (pads.size() != 2 * rank)
    ctx.fail("pads " + ints_str(pads) + " needs " + std::to_string(2 * rank) +
             " values (all begins, then all ends) for " + shape_str(x.shape));
  Shape out = x.shape;
  for (size_t k = 0; k < rank; ++k) {
    const int64_t begin = pads[k], end = pads[k + rank];
    const SymInt& d = x.shape[k];
    out[k] = d + begin + end;  // printed as written (s0+1+1): IR text files rely on it
    const std::string where = "dim " + std::to_string(k) + " of size " + d.str() + " padded by (" +
                              std::to_string(begin) + ", " + std::to_string(end) + ")";
    if (begin + end < 0 && out[k] < 0) ctx.fail(where + " would have a negative size");
    if (mode == "reflect" && ((begin > 0 && !(SymInt(begin) < d)) || (end > 0 && !(SymInt(end) < d))))
      ctx.fail("reflect padding must be smaller than the dim: " + where);
    if (mode == "edge" && (begin > 0 || end > 0) && d == 0)
      ctx.fail("edge padding needs a non-empty dim: " + where);
  }
  return {{x.dtype, out}};
}

std::vector<TensorType> tile_rule(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const auto& repeats = ctx.attrs().get_ints("repeats");
  if (repeats.size() != x.rank())
    ctx.fail("repeats " + ints_str(repeats) + " needs one count per dim of " + shape_str(x.shape));
  Shape out = x.shape;
  for (size_t k = 0; k < repeats.size(); ++k) {
    if (repeats[k] < 0) ctx.fail("repeats " + ints_str(repeats) + " has a negative count");
    out[k] = out[k] * repeats[k];
  }
  return {{x.dtype, out}};
}

OpDef shape_op(OpKind kind, int min_inputs, int max_inputs, std::vector<AttrSpec> attrs,
               InferFn infer) {
  return define_op(kind, std::move(attrs), min_inputs, max_inputs, std::move(infer));
}

}  // namespace

void define_shape(std::vector<OpDef>& t) {
  OpDef c;
  c.kind = OpKind::Constant;
  c.attrs = {{"value", AttrType::Tensor, std::nullopt}};
  c.min_inputs = c.max_inputs = 0;
  c.infer = constant_rule;
  t.push_back(std::move(c));
  t.push_back(shape_op(OpKind::SymInts, 0, 0,
                       {{"values", AttrType::Syms, std::nullopt},
                        {"dtype", AttrType::Type, DType::I64},
                        {"scalar", AttrType::Bool, false}},
                       sym_ints_rule));
  t.push_back(shape_op(OpKind::Arange, 0, 0,
                       {{"start", AttrType::Float, 0.0},
                        {"step", AttrType::Float, 1.0},
                        {"count", AttrType::Syms, std::nullopt},
                        {"dtype", AttrType::Type, DType::I64}},
                       arange_rule));
  t.push_back(shape_op(OpKind::RandUniform, 1, 1,
                       {{"shape", AttrType::Syms, std::nullopt}, {"mix", AttrType::Bool, false}},
                       rand_uniform_rule));

  using Ints = std::vector<int64_t>;
  // shape: dims may be symbolic; one -1 is inferred; 0 is a literal size 0.
  t.push_back(shape_op(OpKind::Reshape, 1, 1, {{"shape", AttrType::Syms, std::nullopt}}, reshape_rule));
  t.push_back(shape_op(OpKind::Permute, 1, 1, {{"dims", AttrType::Ints, std::nullopt}}, permute_rule));
  // ONNX Slice; empty axes means 0..n-1 and empty steps means all 1. Starts and ends may be
  // symbolic (x[:t] for a sequence length t).
  t.push_back(shape_op(OpKind::Slice, 1, 1,
                       {{"axes", AttrType::Ints, Ints{}},
                        {"starts", AttrType::Syms, std::nullopt},
                        {"ends", AttrType::Syms, std::nullopt},
                        {"steps", AttrType::Ints, Ints{}}},
                       slice_rule));
  t.push_back(shape_op(OpKind::Concat, 1, -1, {{"dim", AttrType::Int, int64_t(0)}}, concat_rule));
  t.push_back(shape_op(OpKind::Split, 1, 1,
                       {{"dim", AttrType::Int, int64_t(0)}, {"sizes", AttrType::Ints, std::nullopt}},
                       split_rule));
  t.push_back(shape_op(OpKind::Gather, 2, 2, {{"dim", AttrType::Int, int64_t(0)}}, gather_rule));
  t.push_back(shape_op(OpKind::IndexSelect, 2, 2, {{"dim", AttrType::Int, int64_t(0)}},
                       index_select_rule));
  t.push_back(shape_op(OpKind::Expand, 1, 1, {{"shape", AttrType::Syms, std::nullopt}}, expand_rule));
  // pads in ONNX order: every dim's begin, then every dim's end; negative values crop.
  t.push_back(shape_op(OpKind::Pad, 1, 1,
                       {{"pads", AttrType::Ints, std::nullopt},
                        {"mode", AttrType::String, std::string("constant")},
                        {"value", AttrType::Float, 0.0}},
                       pad_rule));
  t.push_back(shape_op(OpKind::Tile, 1, 1, {{"repeats", AttrType::Ints, std::nullopt}}, tile_rule));
}

}  // namespace kiln::ops
