// Lowering of reductions, argmax/argmin, logsumexp and softmax to Reduce (+ pointwise) kernels.
// The iteration space is the output; the reduced dims are flattened into one loop counter.
#include <cmath>

#include "core/kernel/lower.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

// The accumulator type: float for 16-bit floats, the output type otherwise.
DType accumulate_in(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

struct ReducedLoop {
  std::vector<bool> mask;  // per input dim
  SymInt extent = 1;       // product of reduced sizes
};

std::vector<bool> mask_of(const std::vector<int64_t>& dims, size_t rank) {
  std::vector<bool> mask(rank, dims.empty());
  for (int64_t d : dims) mask[size_t(d < 0 ? d + int64_t(rank) : d)] = true;
  return mask;
}

// Offset of the input element for output coordinate + loop counter r. The outermost reduced dim
// takes r / inner as it is: r < extent bounds it already, and a loop without a modulo vectorizes.
ExprRef reduced_offset(KernelBuilder& b, const Shape& in, const std::vector<bool>& mask,
                       bool keepdim) {
  std::vector<ExprRef> coords(in.size());
  size_t outermost = in.size();
  for (size_t i = in.size(); i-- > 0;)
    if (mask[i]) outermost = i;
  SymInt inner = 1;  // r's stride for the current reduced dim (row-major over reduced dims)
  for (size_t i = in.size(); i-- > 0;) {
    if (!mask[i]) continue;
    ExprRef r = inner.is_static() && inner.value() == 1 ? reduction_index()
                                                         : idiv(reduction_index(), b.param_for(inner));
    coords[i] = i == outermost ? r : imod(r, b.param_for(in[i]));
    inner = inner * in[i];
  }
  int out_dim = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (mask[i]) {
      if (keepdim) ++out_dim;
      continue;
    }
    coords[i] = coord(out_dim++);
  }
  return b.offset_of(coords, in);
}

SymInt extent_of(const Shape& in, const std::vector<bool>& mask) {
  SymInt n = 1;
  for (size_t i = 0; i < in.size(); ++i)
    if (mask[i]) n = n * in[i];
  return n;
}

std::string kernel_name(OpKind kind, DType t, size_t rank) {
  return std::string(op_name(kind)) + "_" + std::string(dtype_name(t)) + "_r" + std::to_string(rank);
}

// One Reduce kernel over `x` (slot 0) into `out` (slot 1): combiner, optional body transform
// (value -> value) and epilogue (accumulator -> stored value).
LoweredKernel reduce_kernel(const std::string& name, const TensorType& x, const TensorType& out,
                            const std::vector<bool>& mask, bool keepdim, OpKind combiner,
                            DType acc_type, int origin,
                            const std::function<ExprRef(KernelBuilder&, ExprRef)>& body_fn,
                            const std::function<ExprRef(KernelBuilder&, ExprRef)>& epilogue_fn,
                            const std::vector<TensorType>& extra_inputs = {}) {
  KernelBuilder b(name, KernelKind::Reduce, out.shape);
  int xs = b.add_buffer(x.dtype, false);
  for (const TensorType& t : extra_inputs) b.add_buffer(t.dtype, false);
  int os = b.add_buffer(out.dtype, true);
  ExprRef v = load(xs, x.dtype, reduced_offset(b, x.shape, mask, keepdim));
  bool arg = combiner == OpKind::ArgMax || combiner == OpKind::ArgMin;
  v = cast(v, arg ? accumulate_in(x.dtype) : acc_type);
  if (body_fn) v = body_fn(b, v);
  Kernel& k = b.kernel();
  k.combiner = combiner;
  k.accumulator_type = acc_type;
  k.extent = b.param_for(extent_of(x.shape, mask));
  k.body = with_origins(v, {origin});
  ExprRef result = accumulator(acc_type);
  if (epilogue_fn) result = epilogue_fn(b, result);
  k.stores.push_back({os, with_origins(cast(result, out.dtype), {origin})});
  return b.finish();
}

}  // namespace

LoweredOp lower_reduce(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                       const std::vector<TensorType>& outputs, int origin) {
  const TensorType& x = inputs.at(0);
  const TensorType& out = outputs.at(0);
  LoweredOp lowered;
  std::string name = kernel_name(kind, x.dtype, x.rank());
  DType acc = accumulate_in(out.dtype);

  switch (kind) {
    case OpKind::Sum: case OpKind::Prod: case OpKind::ReduceMax: case OpKind::ReduceMin:
    case OpKind::Mean: {
      auto mask = mask_of(attrs.get_ints("dims"), x.rank());
      bool keepdim = attrs.get_bool("keepdim");
      OpKind combiner = kind == OpKind::Mean ? OpKind::Sum : kind;
      std::function<ExprRef(KernelBuilder&, ExprRef)> epilogue;
      if (kind == OpKind::Mean) {
        SymInt count = extent_of(x.shape, mask);
        epilogue = [count, acc](KernelBuilder& b, ExprRef a) {
          return op(OpKind::Div, acc, {a, cast(b.param_for(count), acc)});
        };
      }
      lowered.steps.push_back(
          {reduce_kernel(name, x, out, mask, keepdim, combiner, acc, origin, nullptr, epilogue), {0, 1}});
      return lowered;
    }
    case OpKind::ArgMax: case OpKind::ArgMin: {
      std::vector<bool> mask(x.rank(), false);
      if (x.rank() > 0) {
        int64_t d = attrs.get_int("dim");
        mask[size_t(d < 0 ? d + int64_t(x.rank()) : d)] = true;
      }
      lowered.steps.push_back({reduce_kernel(name, x, out, mask, attrs.get_bool("keepdim"), kind,
                                             DType::I32, origin, nullptr, nullptr),
                               {0, 1}});
      return lowered;
    }
    case OpKind::LogSumExp: {
      // max into a temp (same shape as the output), then log(sum(exp(x - max))) + max.
      auto mask = mask_of(attrs.get_ints("dims"), x.rank());
      bool keepdim = attrs.get_bool("keepdim");
      TensorType m{acc, out.shape};
      lowered.temps.push_back(m);
      lowered.steps.push_back({reduce_kernel(name + "_max", x, m, mask, keepdim, OpKind::ReduceMax,
                                             acc, origin, nullptr, nullptr),
                               {0, 2}});
      auto max_here = [acc](KernelBuilder&) { return load(1, acc, linear_index()); };
      lowered.steps.push_back(
          {reduce_kernel(
               name + "_sum", x, out, mask, keepdim, OpKind::Sum, acc, origin,
               [&](KernelBuilder& b, ExprRef v) {
                 ExprRef mx = max_here(b);
                 // An all -inf slice has max -inf: subtract 0 instead so exp gives 0, not NaN.
                 ExprRef safe = select(op(OpKind::Eq, DType::Bool, {mx, constant(-INFINITY, acc)}),
                                       constant(0, acc), mx);
                 return op(OpKind::Exp, acc, {op(OpKind::Sub, acc, {v, safe})});
               },
               [&](KernelBuilder& b, ExprRef a) {
                 ExprRef mx = max_here(b);
                 ExprRef safe = select(op(OpKind::Eq, DType::Bool, {mx, constant(-INFINITY, acc)}),
                                       constant(0, acc), mx);
                 return op(OpKind::Add, acc, {op(OpKind::Log, acc, {a}), safe});
               },
               {m}),
           {0, 2, 1}});
      return lowered;
    }
    case OpKind::Softmax: case OpKind::LogSoftmax: {
      int64_t d = attrs.get_int("dim");
      if (d < 0) d += int64_t(x.rank());
      std::vector<bool> mask(x.rank(), false);
      if (x.rank() > 0) mask[size_t(d)] = true;
      Shape row = x.shape;
      if (x.rank() > 0) row[size_t(d)] = 1;
      TensorType mx{acc, row}, sum{acc, row};
      lowered.temps = {mx, sum};  // args 2 and 3
      lowered.steps.push_back({reduce_kernel(name + "_max", x, mx, mask, true, OpKind::ReduceMax,
                                             acc, origin, nullptr, nullptr),
                               {0, 2}});
      lowered.steps.push_back(
          {reduce_kernel(name + "_sum", x, sum, mask, true, OpKind::Sum, acc, origin,
                         [&](KernelBuilder&, ExprRef v) {
                           return op(OpKind::Exp, acc, {op(OpKind::Sub, acc, {v, load(1, acc, linear_index())})});
                         },
                         nullptr, {mx}),
           {0, 2, 3}});
      // Normalize: exp(x - max) / sum, or x - max - log(sum).
      KernelBuilder b(name + "_norm", KernelKind::Pointwise, x.shape);
      int xs = b.add_buffer(x.dtype, false);
      int ms = b.add_buffer(acc, false);
      int ss = b.add_buffer(acc, false);
      int os = b.add_buffer(out.dtype, true);
      ExprRef v = cast(load(xs, x.dtype, linear_index()), acc);
      ExprRef m = load(ms, acc, b.broadcast_offset(row));
      ExprRef s = load(ss, acc, b.broadcast_offset(row));
      ExprRef shifted = op(OpKind::Sub, acc, {v, m});
      ExprRef r = kind == OpKind::Softmax
                      ? op(OpKind::Div, acc, {op(OpKind::Exp, acc, {shifted}), s})
                      : op(OpKind::Sub, acc, {shifted, op(OpKind::Log, acc, {s})});
      b.kernel().stores.push_back({os, with_origins(cast(r, out.dtype), {origin})});
      lowered.steps.push_back({b.finish(), {0, 2, 3, 1}});
      return lowered;
    }
    default:
      throw Error("op '" + std::string(op_name(kind)) + "' is not a reduction");
  }
}

}  // namespace kiln::kernel
