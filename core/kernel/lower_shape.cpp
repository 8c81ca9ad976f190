// Lowering of the data-movement ops to kernel IR: each output element loads one input element
// through an index map (output coordinate -> input offset), one Pointwise kernel per output.
//
// Every load offset stays inside its buffer whatever branch a select takes, because the printed
// code evaluates every load before the select: concat clamps each input's coordinate, pad clamps
// before choosing the fill value, gather/index_select clamp the index.
#include <algorithm>
#include <functional>
#include <limits>

#include "core/kernel/index_map.h"
#include "core/kernel/lower.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {


using ValueFn = std::function<ExprRef(KernelBuilder&)>;

bool is_static_value(const SymInt& s, int64_t v) { return s.is_static() && s.value() == v; }

int64_t normalized_dim(int64_t dim, size_t rank) {
  return dim < 0 ? dim + int64_t(std::max<size_t>(rank, 1)) : dim;
}

// A Pointwise kernel over `out` reading `ins` (slots 0..n-1) and writing slot n with value_fn.
LoweredKernel index_kernel(OpKind kind, const std::vector<TensorType>& ins, const TensorType& out,
                           int origin, const ValueFn& value_fn) {
  std::string name = std::string(op_name(kind)) + "_" + std::string(dtype_name(out.dtype)) + "_r" +
                     std::to_string(out.rank());
  KernelBuilder b(name, KernelKind::Pointwise, out.shape);
  for (const TensorType& t : ins) b.add_buffer(t.dtype, false);
  int os = b.add_buffer(out.dtype, true);
  ExprRef v = value_fn(b);
  b.kernel().stores.push_back({os, with_origins(v, {origin})});
  return b.finish();
}

LoweredOp one_step(LoweredKernel k, size_t num_inputs) {
  LoweredOp lowered;
  std::vector<int> args;
  for (size_t i = 0; i <= num_inputs; ++i) args.push_back(int(i));
  lowered.steps.push_back({std::move(k), std::move(args)});
  return lowered;
}

std::vector<ExprRef> output_coords(size_t rank) {
  std::vector<ExprRef> c;
  for (size_t i = 0; i < rank; ++i) c.push_back(coord(int(i)));
  return c;
}

LoweredOp lower_slice(const AttrMap& attrs, const TensorType& x, const TensorType& out, int origin) {
  const auto& starts = attrs.get_syms("starts");
  const auto& axes_attr = attrs.get_ints("axes");
  const auto& steps_attr = attrs.get_ints("steps");
  std::vector<SymInt> first(x.rank(), 0);
  std::vector<int64_t> step(x.rank(), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes_attr.empty() ? int64_t(i) : axes_attr[i];
    if (axis < 0) axis += int64_t(x.rank());
    step[size_t(axis)] = steps_attr.empty() ? 1 : steps_attr[i];
    first[size_t(axis)] = slice_first(x.shape[size_t(axis)], starts[i], step[size_t(axis)]);
  }
  return one_step(index_kernel(OpKind::Slice, {x}, out, origin, [&](KernelBuilder& b) {
    std::vector<ExprRef> c = output_coords(out.rank());
    // Start and step go through params too, so slices of one rank share a compiled kernel.
    for (size_t k = 0; k < c.size(); ++k)
      c[k] = iadd(b.param_for(first[k]), imul(c[k], b.param_for(step[k])));
    return load(0, x.dtype, b.offset_of(c, x.shape));
  }), 1);
}

LoweredOp lower_permute(const AttrMap& attrs, const TensorType& x, const TensorType& out, int origin) {
  const auto& dims = attrs.get_ints("dims");
  return one_step(index_kernel(OpKind::Permute, {x}, out, origin, [&](KernelBuilder& b) {
    std::vector<ExprRef> c(x.rank());
    for (size_t k = 0; k < dims.size(); ++k)
      c[size_t(normalized_dim(dims[k], x.rank()))] = coord(int(k));
    return load(0, x.dtype, b.offset_of(c, x.shape));
  }), 1);
}

// Output = select(c < end_0, in_0, select(c < end_1, in_1, ... in_last)) along `dim`; each
// input's coordinate is clamped into its own range so the loads not taken stay in bounds.
// Each element loads from every input, so this is the one-kernel form for a few inputs.
LoweredOp lower_concat_step(const AttrMap& attrs, const std::vector<TensorType>& ins,
                            const TensorType& out, int origin) {
  const size_t dim = size_t(normalized_dim(attrs.get_int("dim"), out.rank()));
  return one_step(index_kernel(OpKind::Concat, ins, out, origin, [&](KernelBuilder& b) {
    ExprRef c = coord(int(dim));
    std::vector<std::pair<ExprRef, ExprRef>> pieces;  // (end along dim, value)
    SymInt start = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      const SymInt& n = ins[i].shape[dim];
      if (is_static_value(n, 0)) continue;  // an empty input holds no element to read
      std::vector<ExprRef> coords = output_coords(out.rank());
      coords[dim] = is_static_value(n, 1)
                        ? constant(0, DType::I32)
                        : iclamp(isub(c, b.param_for(start)), constant(0, DType::I32), b.param_for(n - 1));
      pieces.push_back({b.param_for(start + n), load(int(i), ins[i].dtype, b.offset_of(coords, ins[i].shape))});
      start = start + n;
    }
    if (pieces.empty()) return constant(0, out.dtype);  // the output is empty too
    ExprRef v = pieces.back().second;
    for (size_t i = pieces.size() - 1; i-- > 0;) v = select(ilt(c, pieces[i].first), pieces[i].second, v);
    return v;
  }), ins.size());
}

// Every Vulkan device takes at least 128 bytes of push constants (32 int params).
constexpr int kPortableParams = 32;

// A concat whose one kernel would need more params than that (dozens of inputs, as DenseNet's)
// runs as a tree: chunks of `chunk` inputs are concatenated into temps, then the temps, until
// one kernel writes the output. Each level copies the data once more.
LoweredOp lower_concat(const AttrMap& attrs, const std::vector<TensorType>& ins,
                       const TensorType& out, int origin) {
  LoweredOp whole = lower_concat_step(attrs, ins, out, origin);
  if (whole.steps[0].kernel.kernel.num_params <= kPortableParams || ins.size() <= 2) return whole;
  const size_t dim = size_t(normalized_dim(attrs.get_int("dim"), out.rank()));
  for (size_t chunk : {size_t(4), size_t(2)}) {
    LoweredOp lowered;
    bool fits = true;
    std::vector<std::pair<TensorType, int>> level;  // (type, arg index) of this level's pieces
    for (size_t i = 0; i < ins.size(); ++i) level.push_back({ins[i], int(i)});
    const int out_arg = int(ins.size());
    auto add_step = [&](const std::vector<std::pair<TensorType, int>>& pieces, const TensorType& to,
                         int to_arg) {
      std::vector<TensorType> types;
      std::vector<int> args;
      for (const auto& [t, a] : pieces) {
        types.push_back(t);
        args.push_back(a);
      }
      args.push_back(to_arg);
      LoweredOp step = lower_concat_step(attrs, types, to, origin);
      fits = fits && step.steps[0].kernel.kernel.num_params <= kPortableParams;
      lowered.steps.push_back({std::move(step.steps[0].kernel), std::move(args)});
    };
    while (level.size() > chunk) {
      std::vector<std::pair<TensorType, int>> next;
      for (size_t s = 0; s < level.size(); s += chunk) {
        std::vector<std::pair<TensorType, int>> pieces(level.begin() + long(s),
                                                      level.begin() + long(std::min(s + chunk, level.size())));
        if (pieces.size() == 1) {
          next.push_back(pieces[0]);
          continue;
        }
        TensorType temp = out;
        temp.shape[dim] = 0;
        for (const auto& p : pieces) temp.shape[dim] = temp.shape[dim] + p.first.shape[dim];
        const int temp_arg = out_arg + 1 + int(lowered.temps.size());
        lowered.temps.push_back(temp);
        add_step(pieces, temp, temp_arg);
        next.push_back({temp, temp_arg});
      }
      level = std::move(next);
    }
    add_step(level, out, out_arg);
    if (fits) return lowered;
  }
  throw Error("concat of " + std::to_string(ins.size()) + " inputs into " + out.str() +
              ": even two inputs per kernel need more than 128 bytes of push constants");
}

// One kernel per piece, reading the input at the piece's offset along `dim`.
LoweredOp lower_split(const AttrMap& attrs, const TensorType& x, const std::vector<TensorType>& outs,
                      int origin) {
  const size_t dim = size_t(normalized_dim(attrs.get_int("dim"), x.rank()));
  LoweredOp lowered;
  SymInt start = 0;
  for (size_t j = 0; j < outs.size(); ++j) {
    LoweredKernel k = index_kernel(OpKind::Split, {x}, outs[j], origin, [&](KernelBuilder& b) {
      std::vector<ExprRef> c = output_coords(x.rank());
      c[dim] = iadd(c[dim], b.param_for(start));
      return load(0, x.dtype, b.offset_of(c, x.shape));
    });
    lowered.steps.push_back({std::move(k), {0, int(1 + j)}});
    start = start + outs[j].shape[dim];
  }
  return lowered;
}

// An index value made valid for a dim of `size`: negatives count from the end, and anything
// still out of range is clamped so the load stays in bounds, with `ok` false so the caller
// stores 0 there (what the reference writes before it raises). A GPU cannot raise: checked mode
// is where out-of-range indices get reported. The math runs in the index's own type so that i64
// values beyond 32 bits are still caught; the clamped result is I32.
ExprRef checked_index(KernelBuilder& b, ExprRef idx, const SymInt& size, ExprRef* ok) {
  DType t = idx->type;
  ExprRef n = cast(b.param_for(size), t);
  ExprRef zero = constant(0, t);
  ExprRef fixed = select(op(OpKind::Lt, DType::Bool, {idx, zero}), op(OpKind::Add, t, {idx, n}), idx);
  *ok = all_of({op(OpKind::Ge, DType::Bool, {fixed, zero}), op(OpKind::Lt, DType::Bool, {fixed, n})});
  ExprRef last = cast(b.param_for(size - 1), t);
  ExprRef clamped = op(OpKind::Maximum, t, {op(OpKind::Minimum, t, {fixed, last}), zero});
  return cast(clamped, DType::I32);
}

// torch.gather: out[c] = x[c with c[dim] = index[c]].
LoweredOp lower_gather(const AttrMap& attrs, const TensorType& x, const TensorType& index,
                       const TensorType& out, int origin) {
  const size_t rank = x.rank();
  const size_t dim = size_t(normalized_dim(attrs.get_int("dim"), rank));
  const SymInt size = rank == 0 ? SymInt(1) : x.shape[dim];
  return one_step(index_kernel(OpKind::Gather, {x, index}, out, origin, [&](KernelBuilder& b) {
    if (is_static_value(size, 0)) return constant(0, x.dtype);  // every index is out of range
    ExprRef ok;
    ExprRef idx = checked_index(b, load(1, index.dtype, linear_index()), size, &ok);
    std::vector<ExprRef> c = output_coords(rank);
    if (rank > 0) c[dim] = idx;
    ExprRef v = load(0, x.dtype, b.offset_of(c, x.shape));
    return select(ok, v, constant(0, x.dtype));
  }), 2);
}

// ONNX Gather: out[a..., j..., b...] = x[a..., index[j...], b...].
LoweredOp lower_index_select(const AttrMap& attrs, const TensorType& x, const TensorType& index,
                             const TensorType& out, int origin) {
  const size_t dim = size_t(normalized_dim(attrs.get_int("dim"), x.rank()));
  const SymInt& size = x.shape[dim];
  return one_step(index_kernel(OpKind::IndexSelect, {x, index}, out, origin, [&](KernelBuilder& b) {
    if (is_static_value(size, 0)) return constant(0, x.dtype);
    std::vector<ExprRef> oc = output_coords(out.rank());
    std::vector<ExprRef> ic(oc.begin() + long(dim), oc.begin() + long(dim + index.rank()));
    ExprRef ok;
    ExprRef idx = checked_index(b, load(1, index.dtype, b.offset_of(ic, index.shape)), size, &ok);
    std::vector<ExprRef> c(oc.begin(), oc.begin() + long(dim));
    c.push_back(idx);
    c.insert(c.end(), oc.begin() + long(dim + index.rank()), oc.end());
    return select(ok, load(0, x.dtype, b.offset_of(c, x.shape)), constant(0, x.dtype));
  }), 2);
}

// Pad: input coordinate = output coordinate - begin, then per mode: the fill value outside
// (constant), the nearest edge (edge), or one bounce off the edge (reflect; pads < dim).
LoweredOp lower_pad(const AttrMap& attrs, const TensorType& x, const TensorType& out, int origin) {
  const auto& pads = attrs.get_ints("pads");
  const std::string& mode = attrs.get_string("mode");
  const double value = attrs.get_float("value");
  const size_t rank = x.rank();
  bool empty_input = false;
  for (const SymInt& d : x.shape) empty_input = empty_input || is_static_value(d, 0);
  return one_step(index_kernel(OpKind::Pad, {x}, out, origin, [&](KernelBuilder& b) {
    ExprRef fill = constant(value, x.dtype);
    if (empty_input) return fill;  // only edge/reflect reject this, in the shape rule
    std::vector<ExprRef> c = output_coords(rank);
    std::vector<ExprRef> inside;
    ExprRef zero = constant(0, DType::I32);
    for (size_t k = 0; k < rank; ++k) {
      int64_t begin = pads[k], end = pads[k + rank];
      if (begin == 0 && end == 0) continue;
      ExprRef i = isub(c[k], b.param_for(begin));
      ExprRef last = b.param_for(x.shape[k] - 1);
      if (begin <= 0 && end <= 0) {  // a pure crop reads inside the input
        c[k] = i;
      } else if (mode == "reflect") {
        // |i| bounces off the start; last - |last - j| bounces j off the end.
        c[k] = isub(last, iabs(isub(last, iabs(i))));
      } else {
        if (mode == "constant") inside.push_back(all_of({ige(i, zero), ilt(i, b.param_for(x.shape[k]))}));
        c[k] = iclamp(i, zero, last);
      }
    }
    ExprRef v = load(0, x.dtype, b.offset_of(c, x.shape));
    return inside.empty() ? v : select(all_of(inside), v, fill);
  }), 1);
}

}  // namespace

// Constants are not kernels: a constant's bytes are known when the graph is compiled, so a
// backend uploads the literal straight into the output buffer (zero steps here). Baking values
// into shader text would compile one kernel per literal and defeat the size-free kernel cache.
LoweredOp lower_shape(OpKind kind, const AttrMap& given, const std::vector<TensorType>& inputs,
                      const std::vector<TensorType>& outputs, int origin) {
  const AttrMap attrs = complete_attrs(kind, given, {});
  const TensorType& out = outputs.at(0);
  switch (kind) {
    case OpKind::Constant:
      return {};
    case OpKind::SymInts:  // element k is param k: the values' expressions evaluated at launch
      return one_step(index_kernel(kind, {}, out, origin, [&](KernelBuilder& b) {
        const std::vector<SymInt>& values = attrs.get_syms("values");
        ExprRef v = cast(b.param_for(values.back()), out.dtype);
        for (size_t k = values.size() - 1; k-- > 0;)
          v = select(ilt(coord(0), constant(double(k + 1), DType::I32)),
                     cast(b.param_for(values[k]), out.dtype), v);
        return v;
      }), 0);
    case OpKind::Arange:  // computed in the output's type, as the reference does in doubles
      return one_step(index_kernel(kind, {}, out, origin, [&](KernelBuilder&) {
        const DType t = out.dtype;
        return op(OpKind::Add, t,
                  {constant(attrs.get_float("start"), t),
                   op(OpKind::Mul, t, {cast(coord(0), t), constant(attrs.get_float("step"), t)})});
      }), 0);
    case OpKind::RandUniform:  // element i of the seed's stream (core/support/random.h)
      return one_step(index_kernel(kind, {inputs[0]}, out, origin, [&](KernelBuilder&) {
        return op(OpKind::RandUniform, DType::F32,
                  {load(0, DType::U64, constant(0, DType::I32)), cast(linear_index(), DType::U64)},
                  {{"mix", attrs.get_bool("mix")}});
      }), 1);
    case OpKind::Reshape:
      return one_step(index_kernel(kind, {inputs[0]}, out, origin, [&](KernelBuilder&) {
        return load(0, inputs[0].dtype, linear_index());
      }), 1);
    case OpKind::Permute:
      return lower_permute(attrs, inputs[0], out, origin);
    case OpKind::Slice:
      return lower_slice(attrs, inputs[0], out, origin);
    case OpKind::Concat:
      return lower_concat(attrs, inputs, out, origin);
    case OpKind::Split:
      return lower_split(attrs, inputs[0], outputs, origin);
    case OpKind::Gather:
      return lower_gather(attrs, inputs[0], inputs[1], out, origin);
    case OpKind::IndexSelect:
      return lower_index_select(attrs, inputs[0], inputs[1], out, origin);
    case OpKind::Expand:
      return one_step(index_kernel(kind, {inputs[0]}, out, origin, [&](KernelBuilder& b) {
        return load(0, inputs[0].dtype, b.broadcast_offset(inputs[0].shape));
      }), 1);
    case OpKind::Pad:
      return lower_pad(attrs, inputs[0], out, origin);
    case OpKind::Tile:
      return one_step(index_kernel(kind, {inputs[0]}, out, origin, [&](KernelBuilder& b) {
        const TensorType& x = inputs[0];
        const auto& repeats = attrs.get_ints("repeats");
        std::vector<ExprRef> c = output_coords(x.rank());
        for (size_t k = 0; k < c.size(); ++k)
          if (repeats[k] != 1) c[k] = imod(c[k], b.param_for(x.shape[k]));
        return load(0, x.dtype, b.offset_of(c, x.shape));
      }), 1);
    default:
      throw Error("op '" + std::string(op_name(kind)) + "' is not a data-movement op");
  }
}

}  // namespace kiln::kernel
