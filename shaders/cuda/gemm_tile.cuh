// The f32 SIMT main loop shared by the matmul and conv templates: a BM x BN output tile per block,
// TM x TN registers per thread, K in BK steps staged through two shared-memory buffers (the next
// stage's copies are issued before the current one is computed; with ASYNC they are cp.async).
//   BM, BN, BK, TM, TN   tile sizes; the block has THREADS = (BM / TM) * (BN / TN) threads (the
//                        planner defines THREADS as a number: the backend reads it for the launch)
//   A_M_FASTEST          consecutive threads copy consecutive m of A (A contiguous along M)
//   B_N_FASTEST          consecutive threads copy consecutive n of B (B contiguous along N)
// A loader provides `bool a(int m, int k, const float*& src)` and `bool b(int k, int n, ...)`:
// false (with src left at a valid address) for elements outside the operand, which read as 0.
#define WG_X (BN / TN)
#define WG_Y (BM / TM)
#ifndef THREADS
#define THREADS (WG_X * WG_Y)
#endif
static_assert(THREADS == WG_X * WG_Y, "THREADS must be (BM / TM) * (BN / TN)");

template <class Loader>
__device__ inline void kiln_gemm_stage(const Loader& ld, int row0, int col0, int k0, float (*sa)[BM + 1],
                                       float (*sb)[BN + 1]) {
  const int tid = int(threadIdx.x);
  for (int e = tid; e < BM * BK; e += THREADS) {
#if A_M_FASTEST
    const int mm = e % BM, kk = e / BM;
#else
    const int kk = e % BK, mm = e / BK;
#endif
    const float* src;
    const bool ok = ld.a(row0 + mm, k0 + kk, src);
    kiln_copy_f32(&sa[kk][mm], src, ok);
  }
  for (int e = tid; e < BK * BN; e += THREADS) {
#if B_N_FASTEST
    const int nn = e % BN, kk = e / BN;
#else
    const int kk = e % BK, nn = e / BK;
#endif
    const float* src;
    const bool ok = ld.b(k0 + kk, col0 + nn, src);
    kiln_copy_f32(&sb[kk][nn], src, ok);
  }
  kiln_copy_commit();
}

// acc[i][j] = sum over k of A(row0 + ty + i * WG_Y, k) * B(k, col0 + tx + j * WG_X), where
// tx = threadIdx.x % WG_X, ty = threadIdx.x / WG_X.
template <class Loader>
__device__ inline void kiln_gemm_tile(const Loader& ld, int row0, int col0, int K, float (*sa)[BK][BM + 1],
                                      float (*sb)[BK][BN + 1], float (&acc)[TM][TN]) {
  const int tx = int(threadIdx.x) % WG_X, ty = int(threadIdx.x) / WG_X;
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  const int stages = (K + BK - 1) / BK;
  if (stages > 0) kiln_gemm_stage(ld, row0, col0, 0, sa[0], sb[0]);
  for (int s = 0; s < stages; ++s) {
    // Buffer (s + 1) & 1 was last read in stage s - 1, which ended with a barrier.
    if (s + 1 < stages) {
      kiln_gemm_stage(ld, row0, col0, (s + 1) * BK, sa[(s + 1) & 1], sb[(s + 1) & 1]);
      kiln_copy_wait_all_but_one();
    } else {
      kiln_copy_wait_all();
    }
    __syncthreads();
    float (*ta)[BM + 1] = sa[s & 1];
    float (*tb)[BN + 1] = sb[s & 1];
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      for (int i = 0; i < TM; ++i) av[i] = ta[kk][ty + i * WG_Y];
      for (int j = 0; j < TN; ++j) bv[j] = tb[kk][tx + j * WG_X];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
}
