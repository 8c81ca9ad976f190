// The f32 product inside the cpu convolution, C[m x n] += A[m x k] B[k x n] (A the group's weights,
// B the column matrix or the input planes), with an AVX2+FMA register tile chosen at run time.
// The portable blocked GEMM (gemm_kernel.h) is built for baseline x86-64 (4-wide SSE, no FMA); this
// tile keeps 6 x 16 sums in 12 ymm registers (ResNet-18 on cpu: 286 -> 91 ms per run).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define KILN_CONV_GEMM_AVX2 1
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::reference::conv_gemm {

inline constexpr int64_t kRows = 6, kCols = 16, kDepth = 256;

// Whether this CPU runs the AVX2+FMA tile (checked once).
inline bool available() {
#if KILN_CONV_GEMM_AVX2
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

#if KILN_CONV_GEMM_AVX2
// kc steps of the 6 x 16 tile: ap holds the strip's 6 rows p-major (ap[p * 6 + i]), bp 16 columns per
// row with row stride ldb. Rows past `rows` and columns past `cols` are computed but not stored.
__attribute__((target("avx2,fma"))) inline void tile(int64_t kc, const float* ap, const float* bp,
                                                      int64_t ldb, float* c, int64_t ldc, int64_t rows,
                                                      int64_t cols) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(bp + p * ldb), b1 = _mm256_loadu_ps(bp + p * ldb + 8);
    const float* a = ap + p * kRows;
    __m256 v = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(v, b0, c00);
    c01 = _mm256_fmadd_ps(v, b1, c01);
    v = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(v, b0, c10);
    c11 = _mm256_fmadd_ps(v, b1, c11);
    v = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(v, b0, c20);
    c21 = _mm256_fmadd_ps(v, b1, c21);
    v = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(v, b0, c30);
    c31 = _mm256_fmadd_ps(v, b1, c31);
    v = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(v, b0, c40);
    c41 = _mm256_fmadd_ps(v, b1, c41);
    v = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(v, b0, c50);
    c51 = _mm256_fmadd_ps(v, b1, c51);
  }
  alignas(32) float acc[kRows][kCols];
  _mm256_store_ps(acc[0], c00), _mm256_store_ps(acc[0] + 8, c01);
  _mm256_store_ps(acc[1], c10), _mm256_store_ps(acc[1] + 8, c11);
  _mm256_store_ps(acc[2], c20), _mm256_store_ps(acc[2] + 8, c21);
  _mm256_store_ps(acc[3], c30), _mm256_store_ps(acc[3] + 8, c31);
  _mm256_store_ps(acc[4], c40), _mm256_store_ps(acc[4] + 8, c41);
  _mm256_store_ps(acc[5], c50), _mm256_store_ps(acc[5] + 8, c51);
  for (int64_t i = 0; i < rows; ++i) {
    float* out = c + i * ldc;
    if (cols == kCols) {
      _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), _mm256_load_ps(acc[i])));
      _mm256_storeu_ps(out + 8, _mm256_add_ps(_mm256_loadu_ps(out + 8), _mm256_load_ps(acc[i] + 8)));
    } else {
      for (int64_t j = 0; j < cols; ++j) out[j] += acc[i][j];
    }
  }
}

// C += A B on the calling thread; a is row-major with row stride lda, b with row stride ldb, c ldc.
// K runs in kDepth blocks so one 16-column strip of B (16 KiB) stays in L1 across A's row strips.
__attribute__((target("avx2,fma"))) inline void gemm_accumulate(int64_t m, int64_t n, int64_t k,
                                                                const float* a, int64_t lda,
                                                                const float* b, int64_t ldb, float* c,
                                                                int64_t ldc) {
  thread_local std::vector<float> a_pack, b_tail;
  const int64_t strips = (m + kRows - 1) / kRows;
  a_pack.resize(size_t(strips * kRows * kDepth));
  b_tail.resize(size_t(kDepth * kCols));
  for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - p0);
    for (int64_t s = 0; s < strips; ++s) {  // rows past m pack as zeros
      float* dst = a_pack.data() + s * kRows * kc;
      for (int64_t i = 0; i < kRows; ++i) {
        const int64_t r = s * kRows + i;
        if (r >= m) {
          for (int64_t p = 0; p < kc; ++p) dst[p * kRows + i] = 0.0f;
          continue;
        }
        const float* src = a + r * lda + p0;
        for (int64_t p = 0; p < kc; ++p) dst[p * kRows + i] = src[p];
      }
    }
    for (int64_t j0 = 0; j0 < n; j0 += kCols) {
      const int64_t cols = std::min(kCols, n - j0);
      const float* bp = b + p0 * ldb + j0;
      int64_t bld = ldb;
      if (cols < kCols) {  // the last strip: copy it zero-padded so loads stay in bounds
        for (int64_t p = 0; p < kc; ++p) {
          float* row = b_tail.data() + p * kCols;
          std::memcpy(row, bp + p * ldb, size_t(cols) * sizeof(float));
          std::fill(row + cols, row + kCols, 0.0f);
        }
        bp = b_tail.data();
        bld = kCols;
      }
      for (int64_t s = 0; s < strips; ++s)
        tile(kc, a_pack.data() + s * kRows * kc, bp, bld, c + s * kRows * ldc + j0, ldc,
             std::min(kRows, m - s * kRows), cols);
    }
  }
}
#endif

}  // namespace kiln::reference::conv_gemm
