// Tiled f32 matrix product out = alpha * op(A) op(B) + beta * C, batched, on the SIMT cores; the
// planner (backends/cuda/cuda_templates.cpp) prepends the variant's #defines, common.cuh and
// gemm_tile.cuh. Semantics as shaders/matmul.comp:
//   TRANS_A   A is stored [K, M] (element (m, k) at k * lda + m), else [M, K]
//   TRANS_B   B is stored [N, K] (element (k, n) at n * ldb + k), else [K, N]
//   HAS_C     add beta * C[m * c_row + n * c_col] (strides 0 broadcast: bias rows, columns)
// Batches are blockIdx.z = b0 * batch1 + b1, with per-operand strides (0 = broadcast).

// MatmulParams: matmul_params.cuh, placed before this file by the planner.
struct MatmulLoader {
  const float* pa;
  const float* pb;
  MatmulParams p;
  int a_base, b_base;
  __device__ bool a(int m, int k, const float*& src) const {
    const bool ok = m < p.M && k < p.K;
#if TRANS_A
    src = ok ? pa + a_base + k * p.lda + m : pa;
#else
    src = ok ? pa + a_base + m * p.lda + k : pa;
#endif
    return ok;
  }
  __device__ bool b(int k, int n, const float*& src) const {
    const bool ok = k < p.K && n < p.N;
#if TRANS_B
    src = ok ? pb + b_base + n * p.ldb + k : pb;
#else
    src = ok ? pb + b_base + k * p.ldb + n : pb;
#endif
    return ok;
  }
};

// A fused epilogue (backends/template_epilogue.cpp) is declared here: EPILOGUE(v, index, channel),
// the value to store for result v at that output element, and its operands' parameters.
// KILN_EPILOGUE
#ifndef EPILOGUE
#define EPILOGUE(v, index, channel) (v)
#define KILN_EPILOGUE_PARAMS
#endif

extern "C" __global__ void __launch_bounds__(THREADS) kiln_matmul_f32(const float* a, const float* b,
#if HAS_C
                                                                      const float* c,
#endif
                                                                      float* out KILN_EPILOGUE_PARAMS, MatmulParams p) {
  __shared__ float sa[2][BK][BM + 1];  // +1: transposed stores do not all hit one bank
  __shared__ float sb[2][BK][BN + 1];
  const int z = int(blockIdx.z);
  const int b0 = z / p.batch1, b1 = z - b0 * p.batch1;
  MatmulLoader ld{a, b, p, p.a_offset + b0 * p.a_batch0 + b1 * p.a_batch1, p.b_offset + b0 * p.b_batch0 + b1 * p.b_batch1};
  const int row0 = int(blockIdx.y) * BM, col0 = int(blockIdx.x) * BN;
  float acc[TM][TN];
  kiln_gemm_tile(ld, row0, col0, p.K, sa, sb, acc);

  const int tx = int(threadIdx.x) % WG_X, ty = int(threadIdx.x) / WG_X;
  float* o = out + z * p.M * p.ldo;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = row0 + ty + i * WG_Y;
    if (m >= p.M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = col0 + tx + j * WG_X;
      if (n >= p.N) continue;
      float v = p.alpha * acc[i][j];
#if HAS_C
      // The reference rounds beta * C to f32 before adding the product: same order here.
      v += p.beta * c[m * p.c_row + n * p.c_col];
#endif
      o[m * p.ldo + n] = EPILOGUE(v, z * p.M * p.ldo + m * p.ldo + n, n);
    }
  }
}
