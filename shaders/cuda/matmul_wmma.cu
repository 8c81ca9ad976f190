// f16 / bf16 matrix product on the tensor cores (nvcuda::wmma 16x16x16 fragments, f32 accumulate),
// sm_80+: out = alpha * op(A) op(B) + beta * C with the semantics and parameters of matmul_f32.cu,
// rounded once to the element type. A 64x64 output tile per block of 4 warps (each 32x32: 2x2
// fragments), K in steps of 32 staged through shared memory; the f32 tile goes back through shared
// memory for the epilogue, so edges and broadcasts need no fragment-layout knowledge.
//   BF16   elements are __nv_bfloat16 (else __half)
//   TRANS_A, TRANS_B, HAS_C   as in matmul_f32.cu
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define BM 64
#define BN 64
#define BK 32
#define THREADS 128
#define PAD_AB 8  // keeps wmma's 32-byte alignment and 8-element leading dims, spreads banks
#define PAD_C 4

#if BF16
typedef __nv_bfloat16 elem_t;
__device__ inline float to_f32(elem_t v) { return __bfloat162float(v); }
__device__ inline elem_t from_f32(float v) { return __float2bfloat16_rn(v); }
#else
typedef __half elem_t;
__device__ inline float to_f32(elem_t v) { return __half2float(v); }
__device__ inline elem_t from_f32(float v) { return __float2half_rn(v); }
#endif

// MatmulParams: matmul_params.cuh, placed before this file by the planner.
extern "C" __global__ void __launch_bounds__(THREADS) kiln_matmul_wmma(const elem_t* a, const elem_t* b,
#if HAS_C
                                                                       const elem_t* c,
#endif
                                                                       elem_t* out, MatmulParams p) {
  using namespace nvcuda;
  __shared__ __align__(32) elem_t sa[BM][BK + PAD_AB];
  __shared__ __align__(32) elem_t sb[BK][BN + PAD_AB];
  __shared__ __align__(32) float sc[BM][BN + PAD_C];
  const int tid = int(threadIdx.x), warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;  // the warp's 32x32 quarter of the tile
  const int z = int(blockIdx.z);
  const int b0 = z / p.batch1, b1 = z - b0 * p.batch1;
  const elem_t* pa = a + p.a_offset + b0 * p.a_batch0 + b1 * p.a_batch1;
  const elem_t* pb = b + p.b_offset + b0 * p.b_batch0 + b1 * p.b_batch1;
  const int row0 = int(blockIdx.y) * BM, col0 = int(blockIdx.x) * BN;
  const elem_t zero = from_f32(0.0f);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < p.K; k0 += BK) {
    // Consecutive threads walk the operand's contiguous dim; out-of-range elements are zero.
    for (int e = tid; e < BM * BK; e += THREADS) {
#if TRANS_A
      const int mm = e % BM, kk = e / BM;
#else
      const int kk = e % BK, mm = e / BK;
#endif
      const int m = row0 + mm, k = k0 + kk;
#if TRANS_A
      sa[mm][kk] = (m < p.M && k < p.K) ? pa[k * p.lda + m] : zero;
#else
      sa[mm][kk] = (m < p.M && k < p.K) ? pa[m * p.lda + k] : zero;
#endif
    }
    for (int e = tid; e < BK * BN; e += THREADS) {
#if TRANS_B
      const int kk = e % BK, nn = e / BK;
#else
      const int nn = e % BN, kk = e / BN;
#endif
      const int k = k0 + kk, n = col0 + nn;
#if TRANS_B
      sb[kk][nn] = (k < p.K && n < p.N) ? pb[n * p.ldb + k] : zero;
#else
      sb[kk][nn] = (k < p.K && n < p.N) ? pb[k * p.ldb + n] : zero;
#endif
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, elem_t, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, elem_t, wmma::row_major> fb[2];
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &sa[wm * 32 + i * 16][kk], BK + PAD_AB);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &sb[kk][wn * 32 + j * 16], BN + PAD_AB);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&sc[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], BN + PAD_C, wmma::mem_row_major);
  __syncthreads();
  elem_t* o = out + z * p.M * p.ldo;
  for (int e = tid; e < BM * BN; e += THREADS) {
    const int mm = e / BN, nn = e % BN;
    const int m = row0 + mm, n = col0 + nn;
    if (m >= p.M || n >= p.N) continue;
    float v = p.alpha * sc[mm][nn];
#if HAS_C
    v += p.beta * to_f32(c[m * p.c_row + n * p.c_col]);
#endif
    o[m * p.ldo + n] = from_f32(v);
  }
}
