// Lowering of the Winograd F(2x2, 3x3) ops (core/ir/ops/winograd.cpp) to Reduce kernels:
// winograd_weights loops over the 9 filter taps of one transformed element; winograd_input and
// winograd_output are one term each, the sum written out: the 4 input taps that the two nonzeros
// of a row of B^T pick for each of the element's rows, and the 9 tile positions that the three
// nonzeros of a row of A^T pick. Which taps and signs belong to an element follows from its
// coordinates through small tables (core/ir/winograd_matrices.h) written as select chains. As
// anchors, winograd_output's kernel takes pointwise consumers (a bias, an activation, a residual
// add) in its epilogue.
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

// The p-th nonzero of a transform's row `row` (a run-time I32 in [0, Rows)): its column and
// coefficient, as selects over the rows. An element's terms pair the nonzeros of its two rows: its
// kernel sums the PerRow^2 terms written out, which ran ResNet-18's transforms on lavapipe 5-12%
// faster than a loop over the terms that looked both nonzeros up in tables of Rows * PerRow
// entries (BENCHMARKS.md, Run 40).
struct Nonzero {
  ExprRef column, coefficient;
};
template <size_t Rows, size_t Cols, size_t PerRow>
std::vector<Nonzero> nonzeros_of_row(const double (&matrix)[Rows][Cols], const int (&columns)[Rows][PerRow],
                                     const ExprRef& row, DType type) {
  std::vector<Nonzero> out;
  for (size_t p = 0; p < PerRow; ++p) {
    std::vector<double> column, coefficient;
    for (size_t r = 0; r < Rows; ++r) {
      column.push_back(columns[r][p]);
      coefficient.push_back(matrix[r][size_t(columns[r][p])]);
    }
    out.push_back({select_from_table(row, column, DType::I32), select_from_table(row, coefficient, type)});
  }
  return out;
}

// The sum over the pairs of `rows`' and `cols`' nonzeros of both coefficients times term(row's
// column, col's column).
template <class Term>
ExprRef sum_of_pairs(const std::vector<Nonzero>& rows, const std::vector<Nonzero>& cols, DType type, Term term) {
  ExprRef sum;
  for (const Nonzero& r : rows)
    for (const Nonzero& c : cols) {
      ExprRef t = fmul(fmul(r.coefficient, c.coefficient, type), term(r.column, c.column), type);
      sum = sum ? fadd(sum, t, type) : t;
    }
  return sum;
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
// input are zero. One term of a Reduce kernel: the four products are written out.
LoweredKernel transform_input(const AttrMap& attrs, const TensorType& x, const TensorType& out, int origin) {
  TransformKernel t(OpKind::WinogradInput, x, out);
  KernelBuilder& b = t.b;
  const int xs = t.in_slot;
  const DType acc = t.acc;
  const std::vector<int64_t> pads = attrs.get_ints("padding");
  ExprRef height = b.param_for(x.shape[2]), width = b.param_for(x.shape[3]);
  ExprRef plane = strided_offset(b, {coord(1), coord(4), nullptr, nullptr}, x.shape);  // x[n, c, 0, 0]
  auto tap = [&](const ExprRef& row_column, const ExprRef& col_column) {
    ExprRef h = isub(iadd(imul(coord(2), iconst(kOutTile)), row_column), iconst(pads[0]));
    ExprRef w = isub(iadd(imul(coord(3), iconst(kOutTile)), col_column), iconst(pads[1]));
    ExprRef offset = iadd(plane, iadd(imul(clamp_index(h, height), width), clamp_index(w, width)));
    ExprRef value = cast(load(xs, x.dtype, offset), acc);
    return select(land(in_range(h, height), in_range(w, width)), value, constant(0, acc));
  };
  ExprRef body = sum_of_pairs(nonzeros_of_row(kBt, kBtColumns, idiv(coord(0), iconst(kTile)), acc),
                              nonzeros_of_row(kBt, kBtColumns, imod(coord(0), iconst(kTile)), acc), acc, tap);
  return t.finish(body, 1, origin);
}

// Y[n, o, 2th + r, 2tw + s] = sum over k, l in {0, 1, 2} of At[r][i_k] At[s][j_l] M[4 i_k + j_l, n, th,
// tw, o], where i_k and j_l are the nonzero columns of rows r and s. One term of a Reduce kernel:
// the nine products are written out.
LoweredKernel transform_output(const TensorType& m, const TensorType& out, int origin) {
  TransformKernel t(OpKind::WinogradOutput, m, out);
  KernelBuilder& b = t.b;
  const int ms = t.in_slot;
  const DType acc = t.acc;
  // M[0, n, th, tw, o], and the distance between M's 16 planes
  ExprRef tile = strided_offset(b, {nullptr, coord(0), idiv(coord(2), iconst(kOutTile)), idiv(coord(3), iconst(kOutTile)),
                                    coord(1)}, m.shape);
  ExprRef plane = b.param_for(m.shape[1] * m.shape[2] * m.shape[3] * m.shape[4]);
  auto tap = [&](const ExprRef& row_column, const ExprRef& col_column) {
    ExprRef offset = iadd(tile, imul(iadd(imul(row_column, iconst(kTile)), col_column), plane));
    return cast(load(ms, m.dtype, offset), acc);
  };
  ExprRef body = sum_of_pairs(nonzeros_of_row(kAt, kAtColumns, imod(coord(2), iconst(kOutTile)), acc),
                              nonzeros_of_row(kAt, kAtColumns, imod(coord(3), iconst(kOutTile)), acc), acc, tap);
  return t.finish(body, 1, origin);
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
