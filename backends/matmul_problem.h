// A matmul, linear or gemm op decoded into one batched GEMM: sizes, transposes, batch strides (0
// where an operand broadcasts) and the epilogue's terms. Shared by the backends' matmul templates.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/backend.h"

namespace kiln {

// out[z][m][n] = alpha * sum_k op(A)[m][k] op(B)[k][n] (+ beta * C[m * c_row + n * c_col]), with
// z = b0 * batch1 + b1 walking at most two merged batch dims.
struct MatmulProblem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;  // A stored [K, M]; B stored [N, K]
  // Leading dims: element (m, k) of A at m * lda + k, or k * lda + m when trans_a; likewise B.
  // Row-major operands have lda = K (M when trans_a); a view read in place may have more.
  int64_t lda = 0, ldb = 0;
  int64_t a_offset = 0, b_offset = 0;  // the element each operand's view starts at
  int64_t batch0 = 1, batch1 = 1;
  int64_t a_batch0 = 0, a_batch1 = 0, b_batch0 = 0, b_batch1 = 0;  // element strides per batch index
  bool has_c = false;
  int64_t c_row = 0, c_col = 0;
  double alpha = 1, beta = 1;

  int64_t batch() const { return batch0 * batch1; }
  int64_t flops() const { return 2 * m * n * k * batch(); }
};

// The problem for a matmul, linear or gemm op (shapes from `run`); nothing for other ops or when
// the batch broadcast needs more than two strided dims, or a linear bias is not a row vector.
// A matmul's operands may be strided (BufferView::strides) where each matrix has one dim of
// stride 1 (a transpose is trans_a / trans_b); linear and gemm take row-major operands.
std::optional<MatmulProblem> decode_matmul(const OpRun& run);

// Folds the batch into the rows where B is one matrix for every batch (a sequence times a weight)
// and A's rows lie evenly apart across the batch: one [batch * m, k] x [k, n] product, which a
// GEMM kernel runs faster than `batch` products of a few rows (16 rows of one: 8.3 -> 4.8 us on
// cpu). The result [batch, m, n] is row-major either way. False, p unchanged, where it does not apply.
bool fold_batch_into_rows(MatmulProblem& p);

// Whether every operand and the output have fewer than 2^31 elements, so 32-bit indices suffice.
bool matmul_fits_i32(const MatmulProblem& p);

// The matmul templates' parameter block (shaders/matmul.comp's push constants in scalar layout,
// shaders/cuda/matmul_params.cuh): sizes, leading dimensions, batch strides, the epilogue's terms,
// the operands' first elements.
struct MatmulParams {
  int32_t m, n, k;
  int32_t lda, ldb, ldo;
  int32_t batch1;
  int32_t a_batch0, a_batch1;
  int32_t b_batch0, b_batch1;
  int32_t c_row, c_col;
  float alpha, beta;
  int32_t a_offset, b_offset;
};
// The block for a problem that matmul_fits_i32.
MatmulParams matmul_params(const MatmulProblem& p);

}  // namespace kiln
