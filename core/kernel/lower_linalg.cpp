// Lowering of matmul, gemm and linear to one Reduce kernel over K each: the iteration space is the
// output, the body multiplies one A and one B element, the epilogue applies alpha, beta*C or bias.
#include "core/kernel/lower_util.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

using namespace util;

std::vector<int> identity_binding(size_t n) {
  std::vector<int> v;
  for (size_t i = 0; i < n; ++i) v.push_back(int(i));
  return v;
}

// numpy matmul: 1-d operands act as [1, K] / [K, 1] and lose that dim; batch dims broadcast.
LoweredKernel matmul(const TensorType& a, const TensorType& b_t, const TensorType& out, int origin) {
  KernelBuilder b(kernel_name(OpKind::MatMul, out.dtype, out.rank()), KernelKind::Reduce, out.shape);
  int as = b.add_buffer(a.dtype, false);
  int bs = b.add_buffer(b_t.dtype, false);
  int os = b.add_buffer(out.dtype, true);
  const int rank = int(out.rank());
  const bool a_vec = a.rank() == 1, b_vec = b_t.rank() == 1;
  // Output dims: batch..., [m if a is a matrix], [n if b is a matrix].
  int next = rank;
  ExprRef n = b_vec ? nullptr : coord(--next);
  ExprRef m = a_vec ? nullptr : coord(--next);
  const int out_batch = next;
  auto operand = [&](const TensorType& t, bool vec, std::vector<ExprRef> matrix) {
    const size_t batch = t.rank() - (vec ? 1 : 2);
    std::vector<ExprRef> coords;
    for (size_t i = 0; i < batch; ++i) {
      bool broadcast = t.shape[i].is_static() && t.shape[i].value() == 1;
      coords.push_back(broadcast ? nullptr : coord(out_batch - int(batch) + int(i)));
    }
    for (ExprRef& c : matrix) coords.push_back(c);
    return strided_offset(b, coords, t.shape);
  };
  ExprRef r = reduction_index();
  ExprRef a_off = operand(a, a_vec, a_vec ? std::vector<ExprRef>{r} : std::vector<ExprRef>{m, r});
  ExprRef b_off = operand(b_t, b_vec, b_vec ? std::vector<ExprRef>{r} : std::vector<ExprRef>{r, n});
  DType acc = accumulate_in(out.dtype);
  ExprRef body = fmul(cast(load(as, a.dtype, a_off), acc), cast(load(bs, b_t.dtype, b_off), acc), acc);
  return finish_reduce(b, OpKind::Sum, acc, a.shape.back(), body, os, out.dtype, accumulator(acc),
                       origin);
}

// ONNX Gemm: alpha * op(A) op(B) + beta * C, with C broadcast to [M, N].
LoweredKernel gemm(const AttrMap& attrs, const std::vector<TensorType>& in, const TensorType& out,
                   int origin) {
  const TensorType& a = in[0];
  const TensorType& bt = in[1];
  const bool ta = attrs.get_bool("trans_a"), tb = attrs.get_bool("trans_b");
  const double alpha = attrs.get_float("alpha"), beta = attrs.get_float("beta");
  KernelBuilder b(kernel_name(OpKind::Gemm, out.dtype, out.rank()), KernelKind::Reduce, out.shape);
  int as = b.add_buffer(a.dtype, false);
  int bs = b.add_buffer(bt.dtype, false);
  int cs = in.size() == 3 ? b.add_buffer(in[2].dtype, false) : -1;
  int os = b.add_buffer(out.dtype, true);
  ExprRef m = coord(0), n = coord(1), r = reduction_index();
  ExprRef a_off = strided_offset(b, ta ? std::vector<ExprRef>{r, m} : std::vector<ExprRef>{m, r}, a.shape);
  ExprRef b_off = strided_offset(b, tb ? std::vector<ExprRef>{n, r} : std::vector<ExprRef>{r, n}, bt.shape);
  DType acc = accumulate_in(out.dtype);
  ExprRef body = fmul(cast(load(as, a.dtype, a_off), acc), cast(load(bs, bt.dtype, b_off), acc), acc);
  const SymInt k = ta ? a.shape[0] : a.shape[1];
  // The reference skips C entirely when beta is 0 (so NaN/inf in C do not leak).
  const bool with_c = cs >= 0 && beta != 0.0;
  ExprRef result = accumulator(acc);
  if (is_floating(out.dtype)) {
    if (alpha != 1.0) result = fmul(constant(alpha, acc), result, acc);
    if (with_c) {
      // The reference writes beta * C into the output first, rounding it to the output type.
      ExprRef c = cast(load(cs, in[2].dtype, b.broadcast_offset(in[2].shape)), acc);
      if (beta != 1.0) c = fmul(constant(beta, acc), c, acc);
      result = fadd(result, cast(cast(c, out.dtype), acc), acc);
    }
  } else if (alpha != 1.0 || with_c) {
    // Integers: alpha * sum + int(beta * C), in double, truncated back to the integer type.
    ExprRef v = fmul(constant(alpha, DType::F64), cast(result, DType::F64), DType::F64);
    if (with_c) {
      ExprRef c = cast(load(cs, in[2].dtype, b.broadcast_offset(in[2].shape)), DType::F64);
      c = cast(fmul(constant(beta, DType::F64), c, DType::F64), out.dtype);
      v = fadd(v, cast(c, DType::F64), DType::F64);
    }
    result = v;
  }
  return finish_reduce(b, OpKind::Sum, acc, k, body, os, out.dtype, result, origin);
}

// linear: x[..., K] @ W[N, K]^T (+ bias[N]).
LoweredKernel linear(const std::vector<TensorType>& in, const TensorType& out, int origin) {
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  KernelBuilder b(kernel_name(OpKind::Linear, out.dtype, out.rank()), KernelKind::Reduce, out.shape);
  int xs = b.add_buffer(x.dtype, false);
  int ws = b.add_buffer(w.dtype, false);
  int bias_s = in.size() == 3 ? b.add_buffer(in[2].dtype, false) : -1;
  int os = b.add_buffer(out.dtype, true);
  const int rank = int(out.rank());
  ExprRef r = reduction_index();
  std::vector<ExprRef> xc;
  for (int i = 0; i + 1 < rank; ++i) xc.push_back(coord(i));
  xc.push_back(r);
  ExprRef n = coord(rank - 1);
  DType acc = accumulate_in(out.dtype);
  ExprRef body = fmul(cast(load(xs, x.dtype, strided_offset(b, xc, x.shape)), acc),
                      cast(load(ws, w.dtype, strided_offset(b, {n, r}, w.shape)), acc), acc);
  ExprRef result = accumulator(acc);
  if (bias_s >= 0) result = fadd(result, cast(load(bias_s, in[2].dtype, n), acc), acc);
  return finish_reduce(b, OpKind::Sum, acc, x.shape.back(), body, os, out.dtype, result, origin);
}

}  // namespace

LoweredOp lower_linalg(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                       const std::vector<TensorType>& outputs, int origin) {
  const TensorType& out = outputs.at(0);
  LoweredOp lowered;
  std::vector<int> binding = identity_binding(inputs.size() + 1);
  switch (kind) {
    case OpKind::MatMul:
      lowered.steps.push_back({matmul(inputs.at(0), inputs.at(1), out, origin), binding});
      return lowered;
    case OpKind::Gemm:
      lowered.steps.push_back({gemm(attrs, inputs, out, origin), binding});
      return lowered;
    case OpKind::Linear:
      lowered.steps.push_back({linear(inputs, out, origin), binding});
      return lowered;
    default:
      throw Error("op '" + std::string(op_name(kind)) + "' is not a linalg op");
  }
}

}  // namespace kiln::kernel
