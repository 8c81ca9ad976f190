// The parameter block of the matmul templates (matmul_f32.cu, matmul_wmma.cu); mirrors MatmulParams
// in backends/matmul_problem.h.
struct MatmulParams {
  int M, N, K;
  int lda, ldb, ldo;
  int batch1;
  int a_batch0, a_batch1;
  int b_batch0, b_batch1;
  int c_row, c_col;
  float alpha, beta;
  int a_offset, b_offset;  // the element each operand starts at (a view read in place)
};
