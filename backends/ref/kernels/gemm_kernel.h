// The blocked, packed GEMM shared by matmul, gemm, linear and conv: C = alpha * A B (+ C).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/ref/parallel.h"

namespace kiln::reference {

// A strided matrix operand: element (r, c) lives at data[r * row_stride + c * col_stride], so a
// transposed operand is the same data with its strides swapped; packing absorbs the difference.
template <class T>
struct MatrixView {
  const T* data = nullptr;
  int64_t row_stride = 0, col_stride = 1;

  T at(int64_t r, int64_t c) const { return data[r * row_stride + c * col_stride]; }
  MatrixView shifted(int64_t r, int64_t c) const {
    return {data + r * row_stride + c * col_stride, row_stride, col_stride};
  }
  MatrixView transposed() const { return {data, col_stride, row_stride}; }
};

namespace gemm_detail {

// Micro-tile and cache block sizes. The MR x NR accumulator tile fits the 16 SSE registers of the
// baseline x86-64 target; a KC x NR strip of B stays in L1 and an MC x KC block of A in L2.
inline constexpr int64_t kMR = 6, kNR = 8;
inline constexpr int64_t kKC = 256, kMC = 96, kNC = 512;

// Copies rows [0, mc) x cols [0, kc) of a into MR-row strips, p-major inside a strip, zero-padding
// the last strip so the micro-kernel never needs an edge case.
template <class T>
void pack_a(MatrixView<T> a, int64_t mc, int64_t kc, T* out) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    T* strip = out + ir * kc;
    int64_t rows = std::min(kMR, mc - ir);
    if (a.row_stride == 1) {  // transposed A: a strip's rows are adjacent, read them together
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a.data + ir + p * a.col_stride;
        for (int64_t i = 0; i < kMR; ++i) strip[p * kMR + i] = i < rows ? src[i] : T(0);
      }
      continue;
    }
    for (int64_t i = 0; i < kMR; ++i) {
      if (i >= rows) {
        for (int64_t p = 0; p < kc; ++p) strip[p * kMR + i] = T(0);
        continue;
      }
      const T* src = a.data + (ir + i) * a.row_stride;
      for (int64_t p = 0; p < kc; ++p) strip[p * kMR + i] = src[p * a.col_stride];
    }
  }
}

// Copies rows [0, kc) x cols [0, nc) of b into NR-column strips, zero-padding the last one.
template <class T>
void pack_b(MatrixView<T> b, int64_t kc, int64_t nc, T* out) {
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    T* strip = out + jr * kc;
    int64_t cols = std::min(kNR, nc - jr);
    if (b.row_stride == 1 && b.col_stride != 1) {  // transposed B (linear's weight): walk down k
      for (int64_t j = 0; j < kNR; ++j) {
        const T* src = b.data + (jr + j) * b.col_stride;
        for (int64_t p = 0; p < kc; ++p) strip[p * kNR + j] = j < cols ? src[p] : T(0);
      }
      continue;
    }
    for (int64_t p = 0; p < kc; ++p) {
      const T* src = b.data + p * b.row_stride + jr * b.col_stride;
      T* dst = strip + p * kNR;
      if (cols == kNR && b.col_stride == 1) {
        for (int64_t j = 0; j < kNR; ++j) dst[j] = src[j];
      } else {
        for (int64_t j = 0; j < kNR; ++j) dst[j] = j < cols ? src[j * b.col_stride] : T(0);
      }
    }
  }
}

// acc = A_strip * B_strip over kc; fixed trip counts let the compiler keep acc in vector registers.
template <class T>
inline void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b,
                         T (&acc)[kMR][kNR]) {
  T c[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const T* bp = b + p * kNR;
    const T* ap = a + p * kMR;
    for (int64_t i = 0; i < kMR; ++i)
      for (int64_t j = 0; j < kNR; ++j) c[i][j] += ap[i] * bp[j];
  }
  for (int64_t i = 0; i < kMR; ++i)
    for (int64_t j = 0; j < kNR; ++j) acc[i][j] = c[i][j];
}

// sum_p a[p] * b[p] with kNR independent partial sums, so the loop vectorizes without
// reassociating a single running sum (which the compiler may not do for floats).
template <class T>
T dot(const T* __restrict a, const T* __restrict b, int64_t k) {
  T part[kNR] = {};
  int64_t p = 0;
  for (; p + kNR <= k; p += kNR)
    for (int64_t j = 0; j < kNR; ++j) part[j] += a[p + j] * b[p + j];
  T sum = 0;
  for (int64_t j = 0; j < kNR; ++j) sum += part[j];
  for (; p < k; ++p) sum += a[p] * b[p];
  return sum;
}

// Products with one or two rows (matrix-vector, linear on a single token) would waste most of a
// micro-tile: stream B once with dot products (B columns contiguous) or row updates instead.
template <class T>
void gemm_few_rows(int64_t m, int64_t n, int64_t k, T alpha, MatrixView<T> a, MatrixView<T> b,
                   bool accumulate, T* c, int64_t ldc, std::vector<T>& scratch_row) {
  scratch_row.resize(size_t(std::max(k, n)));
  T* buf = scratch_row.data();
  for (int64_t i = 0; i < m; ++i) {
    T* out = c + i * ldc;
    if (b.row_stride == 1) {
      const T* row = a.data + i * a.row_stride;
      if (a.col_stride != 1) {
        for (int64_t p = 0; p < k; ++p) buf[p] = a.at(i, p);
        row = buf;
      }
      for (int64_t j = 0; j < n; ++j) {
        const T v = alpha * dot(row, b.data + j * b.col_stride, k);
        out[j] = accumulate ? out[j] + v : v;
      }
      continue;
    }
    std::fill(buf, buf + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      const T ap = a.at(i, p);
      const T* brow = b.data + p * b.row_stride;
      if (b.col_stride == 1) {
        for (int64_t j = 0; j < n; ++j) buf[j] += ap * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) buf[j] += ap * brow[j * b.col_stride];
      }
    }
    for (int64_t j = 0; j < n; ++j) out[j] = alpha * buf[j] + (accumulate ? out[j] : T(0));
  }
}

// Reuses one packing buffer per thread and element type across calls.
template <class T>
T* scratch(std::vector<T>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace gemm_detail

// C[m x n] (row stride ldc) = alpha * A[m x k] B[k x n] + (accumulate ? C : 0), on the calling
// thread. T is float or double; other dtypes convert to one of these or use a plain loop.
template <class T>
void gemm_serial(int64_t m, int64_t n, int64_t k, T alpha, MatrixView<T> a, MatrixView<T> b,
                 bool accumulate, T* c, int64_t ldc) {
  using namespace gemm_detail;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  thread_local std::vector<T> a_buffer, b_buffer;
  if (m <= 2) return gemm_few_rows(m, n, k, alpha, a, b, accumulate, c, ldc, a_buffer);
  T* bpack = scratch(b_buffer, size_t(kKC * (std::min(kNC, n) + kNR)));
  T* apack = scratch(a_buffer, size_t(kKC * (std::min(kMC, m) + kMR)));
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const bool add_to_c = accumulate || pc > 0;  // later K blocks add to the first one's sums
      pack_b(b.shifted(pc, jc), kc, nc, bpack);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        pack_a(a.shifted(ic, pc), mc, kc, apack);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int64_t cols = std::min(kNR, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t rows = std::min(kMR, mc - ir);
            T acc[kMR][kNR];
            micro_kernel(kc, apack + ir * kc, bpack + jr * kc, acc);
            T* out = c + (ic + ir) * ldc + jc + jr;
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t j = 0; j < cols; ++j)
                out[i * ldc + j] = alpha * acc[i][j] + (add_to_c ? out[i * ldc + j] : T(0));
          }
        }
      }
    }
  }
}

// One product of a batch: its operands and where its result goes.
template <class T>
struct GemmProblem {
  MatrixView<T> a, b;
  T* c = nullptr;
  int64_t ldc = 0;
};

// Runs every problem (all m x n x k) with parallel_for over (problem, row block, column block)
// tasks; each task packs its own panels, so tasks share nothing but read-only inputs.
template <class T>
void gemm_batched(const std::vector<GemmProblem<T>>& problems, int64_t m, int64_t n, int64_t k,
                  T alpha, bool accumulate) {
  using namespace gemm_detail;
  if (problems.empty() || m <= 0 || n <= 0) return;
  const int64_t row_block = std::min(kMC, m);
  const int64_t row_blocks = (m + row_block - 1) / row_block;
  // Split columns too when rows alone leave threads idle (a matrix-vector product, say).
  int64_t col_block = n;
  auto tasks = [&] {
    return int64_t(problems.size()) * row_blocks * ((n + col_block - 1) / col_block);
  };
  while (tasks() < 2 * num_threads() && col_block > 4 * kNR)
    col_block = (col_block / 2 + kNR - 1) / kNR * kNR;
  const int64_t col_blocks = (n + col_block - 1) / col_block;
  // Tiny products are not worth a thread hand-off.
  const int64_t work_per_task = row_block * col_block * std::max<int64_t>(k, 1);
  const int64_t grain = work_per_task >= (1 << 15) ? 1 : int64_t(1 << 15) / work_per_task;
  parallel_for(tasks(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t jb = t % col_blocks;
      const int64_t ib = (t / col_blocks) % row_blocks;
      const GemmProblem<T>& p = problems[size_t(t / (col_blocks * row_blocks))];
      const int64_t i0 = ib * row_block, j0 = jb * col_block;
      gemm_serial(std::min(row_block, m - i0), std::min(col_block, n - j0), k, alpha,
                  p.a.shifted(i0, 0), p.b.shifted(0, j0), accumulate, p.c + i0 * p.ldc + j0, p.ldc);
    }
  });
}

// The plain triple loop for integer dtypes: sums in Acc (int64_t) and wraps back to T, as PyTorch's
// integer matmul does. Threaded over rows; C = alpha * A B + (accumulate ? C : 0) in double.
template <class T, class Acc = int64_t>
void gemm_integer(const std::vector<GemmProblem<T>>& problems, int64_t m, int64_t n, int64_t k,
                  double alpha, bool accumulate) {
  const int64_t rows = int64_t(problems.size()) * m;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n * k));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const GemmProblem<T>& p = problems[size_t(r / m)];
      const int64_t i = r % m;
      T* out = p.c + i * p.ldc;
      for (int64_t j = 0; j < n; ++j) {
        Acc sum = 0;
        for (int64_t q = 0; q < k; ++q) sum += Acc(p.a.at(i, q)) * Acc(p.b.at(q, j));
        if (alpha == 1.0 && !accumulate) {
          out[j] = T(sum);
        } else {
          double v = alpha * double(sum) + (accumulate ? double(out[j]) : 0.0);
          out[j] = T(int64_t(v));
        }
      }
    }
  });
}

}  // namespace kiln::reference
