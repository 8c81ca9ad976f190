// Lowering of layer_norm, group_norm (two-pass statistics: a mean kernel, a kernel for
// 1/sqrt(mean((x - mean)^2) + eps), then a pointwise normalize) and inference batch_norm (pointwise).
#include "core/kernel/lower_util.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

using namespace util;

// x viewed as [rows, n]: appends the kernels writing mean and rstd (each [rows], type acc) into
// op args mean_arg and rstd_arg. Two passes keep the variance accurate when |mean| >> spread.
void append_moments(LoweredOp& lowered, const std::string& name, const TensorType& x,
                     const SymInt& rows, const SymInt& n, DType acc, double eps, int mean_arg,
                     int rstd_arg, int origin) {
  const Shape space = {rows};
  {
    KernelBuilder b(name + "_mean", KernelKind::Reduce, space);
    int xs = b.add_buffer(x.dtype, false);
    int ms = b.add_buffer(acc, true);
    ExprRef np = b.param_for(n);
    ExprRef body = cast(load(xs, x.dtype, iadd(imul(coord(0), np), reduction_index())), acc);
    ExprRef mean = fdiv(accumulator(acc), cast(np, acc), acc);
    lowered.steps.push_back(
        {finish_reduce(b, OpKind::Sum, acc, n, body, ms, acc, mean, origin), {0, mean_arg}});
  }
  KernelBuilder b(name + "_rstd", KernelKind::Reduce, space);
  int xs = b.add_buffer(x.dtype, false);
  int ms = b.add_buffer(acc, false);
  int rs = b.add_buffer(acc, true);
  ExprRef np = b.param_for(n);
  ExprRef v = cast(load(xs, x.dtype, iadd(imul(coord(0), np), reduction_index())), acc);
  ExprRef d = fsub(v, load(ms, acc, coord(0)), acc);
  ExprRef var = fdiv(accumulator(acc), cast(np, acc), acc);
  ExprRef rstd = op(OpKind::Rsqrt, acc, {fadd(var, constant(eps, acc), acc)});
  lowered.steps.push_back({finish_reduce(b, OpKind::Sum, acc, n, fmul(d, d, acc), rs, acc, rstd,
                                         origin),
                           {0, mean_arg, rstd_arg}});
}

// Optional per-element parameters (weight at input `first`, bias after it), loaded at `offset`.
struct Affine {
  ExprRef weight, bias;  // null when absent
};

Affine load_affine(KernelBuilder& b, const std::vector<TensorType>& in, size_t first,
                   const ExprRef& offset, DType acc, std::vector<int>& binding) {
  Affine a;
  for (size_t i = first; i < first + 2 && i < in.size(); ++i) {
    int slot = b.add_buffer(in[i].dtype, false);
    binding.push_back(int(i));
    ExprRef v = cast(load(slot, in[i].dtype, offset), acc);
    (i == first ? a.weight : a.bias) = v;
  }
  return a;
}

ExprRef apply_affine(ExprRef v, const Affine& a, DType acc) {
  if (a.weight) v = fmul(v, a.weight, acc);
  if (a.bias) v = fadd(v, a.bias, acc);
  return v;
}

// The pointwise step: (x - mean[row]) * rstd[row] * w[param] + b[param] over x's shape.
// `row_of` and `param_of` map the linear index to a statistics row and a parameter offset.
void append_normalize(LoweredOp& lowered, const std::string& name, const std::vector<TensorType>& in,
                      const TensorType& out, DType acc, int mean_arg, int rstd_arg, int origin,
                      const std::function<ExprRef(KernelBuilder&)>& row_of,
                      const std::function<ExprRef(KernelBuilder&)>& param_of) {
  const TensorType& x = in[0];
  KernelBuilder b(name + "_norm", KernelKind::Pointwise, x.shape);
  std::vector<int> binding = {0, mean_arg, rstd_arg};
  int xs = b.add_buffer(x.dtype, false);
  int ms = b.add_buffer(acc, false);
  int rs = b.add_buffer(acc, false);
  ExprRef row = row_of(b);
  Affine affine = load_affine(b, in, 1, param_of(b), acc, binding);
  int os = b.add_buffer(out.dtype, true);
  binding.push_back(int(in.size()));
  ExprRef v = cast(load(xs, x.dtype, linear_index()), acc);
  v = fmul(fsub(v, load(ms, acc, row), acc), load(rs, acc, row), acc);
  v = apply_affine(v, affine, acc);
  b.kernel().stores.push_back({os, with_origins(cast(v, out.dtype), {origin})});
  lowered.steps.push_back({b.finish(), binding});
}

LoweredOp layer_norm(const AttrMap& attrs, const std::vector<TensorType>& in, const TensorType& out,
                     int origin) {
  const TensorType& x = in[0];
  int64_t axis = attrs.get_int("axis");
  if (axis < 0) axis += int64_t(x.rank());
  const SymInt rows = product(x.shape, 0, size_t(axis));
  const SymInt n = product(x.shape, size_t(axis), x.rank());
  const DType acc = accumulate_in(x.dtype);
  const std::string name = kernel_name(OpKind::LayerNorm, x.dtype, x.rank());
  LoweredOp lowered;
  lowered.temps = {{acc, {rows}}, {acc, {rows}}};
  const int mean_arg = int(in.size()) + 1, rstd_arg = mean_arg + 1;
  append_moments(lowered, name, x, rows, n, acc, attrs.get_float("eps"), mean_arg, rstd_arg, origin);
  append_normalize(
      lowered, name, in, out, acc, mean_arg, rstd_arg, origin,
      [&](KernelBuilder& b) { return idiv(linear_index(), b.param_for(n)); },
      [&](KernelBuilder& b) { return imod(linear_index(), b.param_for(n)); });
  return lowered;
}

// Each (image, group) block of C/G channels * spatial elements is contiguous.
LoweredOp group_norm(const AttrMap& attrs, const std::vector<TensorType>& in, const TensorType& out,
                     int origin) {
  const TensorType& x = in[0];
  const SymInt groups = attrs.get_int("num_groups");
  const SymInt spatial = product(x.shape, 2, x.rank());
  const SymInt rows = x.shape[0] * groups;
  const SymInt block = (x.shape[1] / groups) * spatial;
  const DType acc = accumulate_in(x.dtype);
  const std::string name = kernel_name(OpKind::GroupNorm, x.dtype, x.rank());
  LoweredOp lowered;
  lowered.temps = {{acc, {rows}}, {acc, {rows}}};
  const int mean_arg = int(in.size()) + 1, rstd_arg = mean_arg + 1;
  append_moments(lowered, name, x, rows, block, acc, attrs.get_float("eps"), mean_arg, rstd_arg,
                 origin);
  append_normalize(
      lowered, name, in, out, acc, mean_arg, rstd_arg, origin,
      [&](KernelBuilder& b) { return idiv(linear_index(), b.param_for(block)); },
      [&](KernelBuilder& b) {
        return imod(idiv(linear_index(), b.param_for(spatial)), b.param_for(x.shape[1]));
      });
  return lowered;
}

// Inference batch norm with running statistics, per channel: one pointwise kernel.
LoweredOp batch_norm(const AttrMap& attrs, const std::vector<TensorType>& in, const TensorType& out,
                     int origin) {
  const TensorType& x = in[0];
  const DType acc = accumulate_in(x.dtype);
  KernelBuilder b(kernel_name(OpKind::BatchNorm, x.dtype, x.rank()), KernelKind::Pointwise, x.shape);
  std::vector<int> binding = {0, 1, 2};
  int xs = b.add_buffer(x.dtype, false);
  int ms = b.add_buffer(in[1].dtype, false);
  int vs = b.add_buffer(in[2].dtype, false);
  ExprRef c = imod(idiv(linear_index(), b.param_for(product(x.shape, 2, x.rank()))),
                   b.param_for(x.shape[1]));
  Affine affine = load_affine(b, in, 3, c, acc, binding);
  int os = b.add_buffer(out.dtype, true);
  binding.push_back(int(in.size()));
  ExprRef v = cast(load(xs, x.dtype, linear_index()), acc);
  ExprRef mean = cast(load(ms, in[1].dtype, c), acc);
  ExprRef var = cast(load(vs, in[2].dtype, c), acc);
  ExprRef rstd = op(OpKind::Rsqrt, acc, {fadd(var, constant(attrs.get_float("eps"), acc), acc)});
  v = apply_affine(fmul(fsub(v, mean, acc), rstd, acc), affine, acc);
  b.kernel().stores.push_back({os, with_origins(cast(v, out.dtype), {origin})});
  LoweredOp lowered;
  lowered.steps.push_back({b.finish(), binding});
  return lowered;
}

}  // namespace

LoweredOp lower_norm(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                     const std::vector<TensorType>& outputs, int origin) {
  switch (kind) {
    case OpKind::LayerNorm: return layer_norm(attrs, inputs, outputs.at(0), origin);
    case OpKind::GroupNorm: return group_norm(attrs, inputs, outputs.at(0), origin);
    case OpKind::BatchNorm: return batch_norm(attrs, inputs, outputs.at(0), origin);
    default: throw Error("op '" + std::string(op_name(kind)) + "' is not a norm op");
  }
}

}  // namespace kiln::kernel
