// Lowering of the Winograd F(2x2, 3x3) ops (core/ir/ops/winograd.cpp) to Reduce kernels over the
// terms of one transformed element: winograd_weights sums the 9 filter taps, winograd_input the 4
// input taps a row of B^T picks twice (two nonzeros per row), winograd_output the 9 tile
// positions a row of A^T picks twice (three per row). Which taps and signs belong to an element
// follows from its coordinates through small tables (core/ir/winograd_matrices.h) written as select
// chains. As anchors, winograd_output's kernel takes pointwise consumers (a bias, an activation, a
// residual add) in its epilogue.
#include <vector>

#include "core/ir/winograd_matrices.h"
#include "core/kernel/lower_util.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

using namespace util;
using namespace kiln::winograd;

// values[index] for a run-time I32 index in [0, values.size()), as a chain of selects; entries
// equal to the last are the chain's fallthrough.
ExprRef select_from_table(const ExprRef& index, const std::vector<double>& values, DType type) {
  ExprRef out = constant(values.back(), type);
  for (size_t k = values.size() - 1; k-- > 0;)
    if (values[k] != values.back()) out = select(ieq(index, iconst(int64_t(k))), constant(values[k], type), out);
  return out;
}

// The nonzeros of each row of a transform: column and coefficient of row r's p-th, flattened as
// r * per_row + p.
struct Nonzeros {
  std::vector<double> columns, coefficients;
};
template <size_t Rows, size_t Cols, size_t PerRow>
Nonzeros nonzeros_of(const double (&matrix)[Rows][Cols], const int (&columns)[Rows][PerRow]) {
  Nonzeros out;
  for (size_t r = 0; r < Rows; ++r)
    for (size_t p = 0; p < PerRow; ++p) {
      out.columns.push_back(columns[r][p]);
      out.coefficients.push_back(matrix[r][size_t(columns[r][p])]);
    }
  return out;
}

// What reduction term t of a transformed element reads, for the element's rows `row` and `col` of a
// transform with `per_row` nonzeros a row: t picks the (t / per_row)-th nonzero of `row` and the
// (t % per_row)-th of `col`; their columns, and the product of their coefficients in `type`.
struct Term {
  ExprRef row_column, col_column, sign;
};
Term term_of(const Nonzeros& nz, int per_row, const ExprRef& row, const ExprRef& col, DType type) {
  ExprRef t = reduction_index();
  ExprRef row_at = iadd(imul(row, iconst(per_row)), idiv(t, iconst(per_row)));
  ExprRef col_at = iadd(imul(col, iconst(per_row)), imod(t, iconst(per_row)));
  return {select_from_table(row_at, nz.columns, DType::I32), select_from_table(col_at, nz.columns, DType::I32),
          fmul(select_from_table(row_at, nz.coefficients, type), select_from_table(col_at, nz.coefficients, type),
               type)};
}

// One transform's kernel: a Reduce over its element's terms, reading `in` and writing `out`, with
// static sizes as literals (llvmpipe divides by a push constant lane by lane).
struct TransformKernel {
  KernelBuilder b;
  int in_slot, out_slot;
  DType out_type, acc;
  TransformKernel(OpKind kind, const TensorType& in, const TensorType& out)
      : b(kernel_name(kind, out.dtype, out.rank()), KernelKind::Reduce, out.shape),
        in_slot(b.add_buffer(in.dtype, false)),
        out_slot(b.add_buffer(out.dtype, true)),
        out_type(out.dtype),
        acc(accumulate_in(out.dtype)) {
    b.kernel().specialized = true;
  }
  LoweredKernel finish(const ExprRef& body, int64_t terms, int origin) {
    return finish_reduce(b, OpKind::Sum, acc, SymInt(terms), body, out_slot, out_type, accumulator(acc), origin);
  }
};

// U[4i + j, c, o] = sum over the 9 taps t = 3k + l of G[i][k] G[j][l] w[o, c, k, l].
LoweredKernel transform_weights(const TensorType& w, const TensorType& out, int origin) {
  TransformKernel t(OpKind::WinogradWeights, w, out);
  KernelBuilder& b = t.b;
  const int ws = t.in_slot;
  const DType acc = t.acc;
  std::vector<double> g;
  for (const auto& row : kG) g.insert(g.end(), std::begin(row), std::end(row));
  ExprRef i = idiv(coord(0), iconst(kTile)), j = imod(coord(0), iconst(kTile));
  ExprRef tap = reduction_index();
  ExprRef k = idiv(tap, iconst(kTaps)), l = imod(tap, iconst(kTaps));
  ExprRef coefficient = fmul(select_from_table(iadd(imul(i, iconst(kTaps)), k), g, acc),
                             select_from_table(iadd(imul(j, iconst(kTaps)), l), g, acc), acc);
  ExprRef channels = b.param_for(w.shape[1]);
  ExprRef offset = iadd(imul(iadd(imul(coord(2), channels), coord(1)), iconst(kTaps * kTaps)), tap);
  ExprRef body = fmul(coefficient, cast(load(ws, w.dtype, offset), acc), acc);
  return t.finish(body, kTaps * kTaps, origin);
}

// V[4i + j, n, th, tw, c] = sum over p, q in {0, 1} of Bt[i][a_p] Bt[j][b_q] x[n, c, 2th + a_p - top,
// 2tw + b_q - left], where a_p and b_q are the nonzero columns of rows i and j; taps outside the
// input are zero.
LoweredKernel transform_input(const AttrMap& attrs, const TensorType& x, const TensorType& out, int origin) {
  TransformKernel t(OpKind::WinogradInput, x, out);
  KernelBuilder& b = t.b;
  const int xs = t.in_slot;
  const DType acc = t.acc;
  const std::vector<int64_t> pads = attrs.get_ints("padding");
  const Term term = term_of(nonzeros_of(kBt, kBtColumns), kBtNonzeros, idiv(coord(0), iconst(kTile)),
                            imod(coord(0), iconst(kTile)), acc);
  ExprRef height = b.param_for(x.shape[2]), width = b.param_for(x.shape[3]);
  ExprRef h = isub(iadd(imul(coord(2), iconst(kOutTile)), term.row_column), iconst(pads[0]));
  ExprRef w = isub(iadd(imul(coord(3), iconst(kOutTile)), term.col_column), iconst(pads[1]));
  ExprRef inside = land(in_range(h, height), in_range(w, width));
  std::vector<ExprRef> xc = {coord(1), coord(4), clamp_index(h, height), clamp_index(w, width)};
  ExprRef value = cast(load(xs, x.dtype, strided_offset(b, xc, x.shape)), acc);
  ExprRef body = select(inside, fmul(term.sign, value, acc), constant(0, acc));
  return t.finish(body, kBtNonzeros * kBtNonzeros, origin);
}

// Y[n, o, 2th + r, 2tw + s] = sum over k, l in {0, 1, 2} of At[r][i_k] At[s][j_l] M[4 i_k + j_l, n, th,
// tw, o], where i_k and j_l are the nonzero columns of rows r and s.
LoweredKernel transform_output(const TensorType& m, const TensorType& out, int origin) {
  TransformKernel t(OpKind::WinogradOutput, m, out);
  KernelBuilder& b = t.b;
  const int ms = t.in_slot;
  const DType acc = t.acc;
  const Term term = term_of(nonzeros_of(kAt, kAtColumns), kAtNonzeros, imod(coord(2), iconst(kOutTile)),
                            imod(coord(3), iconst(kOutTile)), acc);
  std::vector<ExprRef> mc = {iadd(imul(term.row_column, iconst(kTile)), term.col_column), coord(0),
                             idiv(coord(2), iconst(kOutTile)),
                             idiv(coord(3), iconst(kOutTile)), coord(1)};
  ExprRef body = fmul(term.sign, cast(load(ms, m.dtype, strided_offset(b, mc, m.shape)), acc), acc);
  return t.finish(body, kAtNonzeros * kAtNonzeros, origin);
}

}  // namespace

LoweredOp lower_winograd(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                         const TensorType& out, int origin) {
  LoweredOp lowered;
  auto one_kernel = [&](LoweredKernel k) { lowered.steps.push_back({std::move(k), {0, 1}}); };
  switch (kind) {
    case OpKind::WinogradWeights: one_kernel(transform_weights(inputs.at(0), out, origin)); break;
    case OpKind::WinogradInput: one_kernel(transform_input(attrs, inputs.at(0), out, origin)); break;
    case OpKind::WinogradOutput: one_kernel(transform_output(inputs.at(0), out, origin)); break;
    default: throw Error("op '" + std::string(op_name(kind)) + "' is not a winograd op");
  }
  return lowered;
}

}  // namespace kiln::kernel
