// Matmuls of a few rows as kiln's own loops (small_matmul.h).
#include "backends/cpu/small_matmul.h"

#include <cstring>
#include <optional>
#include <vector>

#include "backends/cpu/vector_math.h"
#include "backends/ref/parallel.h"
#include "backends/matmul_problem.h"
#include "backends/template_util.h"

namespace kiln::cpu {
namespace {

using templates::operand_spread;
using templates::OperandSpread;

typedef float Floats16 __attribute__((vector_size(64)));  // GCC's vector extension: one AVX-512 register

// Columns [j, j + 16V) of the M rows' product with b row-major [k, n] (ldb apart): M x V accumulators
// of 16 floats held in registers while the k rows of b stream by, each row of b read once for all M
// rows of a. Inlined into its (cloned) caller, so it is compiled for the caller's ISA.
template <int M, int V>
[[gnu::always_inline]] inline void column_block(const float* __restrict a, int64_t lda, const float* __restrict b,
                                                int64_t ldb, float* __restrict out, int64_t n, int64_t k, int64_t j) {
  Floats16 acc[M][V] = {};
  for (int64_t kk = 0; kk < k; ++kk) {
    Floats16 row[V];
    for (int q = 0; q < V; ++q) std::memcpy(&row[q], b + kk * ldb + j + 16 * q, sizeof row[q]);
    for (int i = 0; i < M; ++i) {
      const float scale = a[i * lda + kk];
      for (int q = 0; q < V; ++q) acc[i][q] += scale * row[q];
    }
  }
  for (int i = 0; i < M; ++i) std::memcpy(out + i * n + j, acc[i], sizeof acc[i]);
}

// out = a x b for the m (<= kSmallMatmulRows) rows of a (lda apart) and b row-major [k, n]: blocks of
// columns in registers (128 for one row, so that 8 chains of multiply-adds hide each one's latency;
// 64 for more rows), then the last columns a row at a time, as sums of k rows of b scaled by a's
// elements (vectorized along n).
KILN_CPU_CLONES void rows_times_matrix(const float* __restrict a, int64_t lda, const float* __restrict b, int64_t ldb,
                                       float* __restrict out, int64_t m, int64_t n, int64_t k) {
  static_assert(kSmallMatmulRows == 4, "one column_block instance per row count");
  int64_t j = 0;
  if (m == 1)
    for (; j + 128 <= n; j += 128) column_block<1, 8>(a, lda, b, ldb, out, n, k, j);
  for (; j + 64 <= n; j += 64) {
    switch (m) {
      case 1: column_block<1, 4>(a, lda, b, ldb, out, n, k, j); break;
      case 2: column_block<2, 4>(a, lda, b, ldb, out, n, k, j); break;
      case 3: column_block<3, 4>(a, lda, b, ldb, out, n, k, j); break;
      default: column_block<4, 4>(a, lda, b, ldb, out, n, k, j); break;
    }
  }
  for (int64_t i = 0; i < m && j < n; ++i) {
    float* __restrict row = out + i * n;
    for (int64_t c = j; c < n; ++c) row[c] = 0.0f;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float scale = a[i * lda + kk];
      const float* __restrict from = b + kk * ldb;
      for (int64_t c = j; c < n; ++c) row[c] += scale * from[c];
    }
  }
}

// out[i, j] = a[i, :] . b[j, :] for b stored [n, k] (a linear layer's weight): each a dot product in
// 16 partial sums, which vectorize (a single running sum would not: float addition does not
// reassociate), added pairwise at the end. Taken for one row only: it reads the weight once per row
// of a, where oneDNN's packed kernel reads it once for all rows.
KILN_CPU_CLONES void rows_times_rows(const float* __restrict a, int64_t lda, const float* __restrict b, int64_t ldb,
                                     float* __restrict out, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kLanes = 16;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float* __restrict x = a + i * lda;
      const float* __restrict y = b + j * ldb;
      float partial[kLanes] = {};
      int64_t kk = 0;
      for (; kk + kLanes <= k; kk += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) partial[l] += x[kk + l] * y[kk + l];
      for (int64_t l = 0; kk + l < k; ++l) partial[l] += x[kk + l] * y[kk + l];
      for (int64_t width = kLanes / 2; width > 0; width /= 2)
        for (int64_t l = 0; l < width; ++l) partial[l] += partial[l + width];
      out[i * n + j] = partial[0];
    }
}

struct Step {
  OpKind kind;
  int operand;         // the op's input slot, or -1 for relu and neg
  bool operand_first;  // operand op result (sub, div)
  OperandSpread spread = OperandSpread::Scalar;  // along the result's columns
};

// x op= y over the result, y spread as `spread` says: one loop per case, each vectorized.
template <class Op>
inline void each(float* __restrict out, const float* __restrict y, OperandSpread spread, int64_t m,
                 int64_t n, Op op) {
  if (spread == OperandSpread::Full) {
    for (int64_t i = 0; i < m * n; ++i) out[i] = op(out[i], y[i]);
  } else if (spread == OperandSpread::AlongChannel) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) out[i * n + j] = op(out[i * n + j], y[j]);
  } else {
    const float v = y[0];
    for (int64_t i = 0; i < m * n; ++i) out[i] = op(out[i], v);
  }
}

// One epilogue step on the [m, n] result, as the reference computes it (maximum and minimum give
// NaN where either side is NaN; relu gives 0 for NaN).
KILN_CPU_CLONES void apply_step(const Step& s, const float* __restrict y, float* __restrict out, int64_t m, int64_t n) {
  const bool first = s.operand_first;
  switch (s.kind) {
    case OpKind::Relu:
      for (int64_t i = 0; i < m * n; ++i) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
      return;
    case OpKind::Neg:
      for (int64_t i = 0; i < m * n; ++i) out[i] = -out[i];
      return;
    case OpKind::Add: return each(out, y, s.spread, m, n, [](float x, float v) { return x + v; });
    case OpKind::Mul: return each(out, y, s.spread, m, n, [](float x, float v) { return x * v; });
    case OpKind::Sub: return each(out, y, s.spread, m, n, [first](float x, float v) { return first ? v - x : x - v; });
    case OpKind::Div: return each(out, y, s.spread, m, n, [first](float x, float v) { return first ? v / x : x / v; });
    case OpKind::Maximum:
      return each(out, y, s.spread, m, n, [](float x, float v) { return (x != x || v != v) ? x + v : (x > v ? x : v); });
    default:  // minimum
      return each(out, y, s.spread, m, n, [](float x, float v) { return (x != x || v != v) ? x + v : (x < v ? x : v); });
  }
}

class SmallMatmul : public HostKernel {
 public:
  SmallMatmul(const MatmulProblem& p, std::vector<Step> steps, int output_slot)
      : p_(p), steps_(std::move(steps)), output_slot_(output_slot) {}

  void run(const std::vector<HostOperand>& operands) override {
    const float* a = static_cast<const float*>(operands[0].data);
    const float* b = static_cast<const float*>(operands[1].data);
    float* out = static_cast<float*>(operands[size_t(output_slot_)].data);
    const int64_t m = p_.m, n = p_.n;
    if (p_.trans_b) {
      // One row (m = 1) times a weight: past kSmallMatmulFlops, bound by reading the weight, its
      // columns split over the threads, whose cores each stream their part.
      const int64_t columns_per_part = double(p_.flops()) >= kSmallMatmulFlops ? 64 : n;
      reference::parallel_for(n, columns_per_part, [&](int64_t begin, int64_t end) {
        rows_times_rows(a, p_.lda, b + begin * p_.ldb, p_.ldb, out + begin, m, end - begin, p_.k);
      });
    } else {
      rows_times_matrix(a, p_.lda, b, p_.ldb, out, m, n, p_.k);
    }
    if (p_.has_c) {  // + beta * C[i * c_row + j * c_col]
      const float* c = static_cast<const float*>(operands[2].data);
      const float beta = float(p_.beta);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) out[i * n + j] += beta * c[i * p_.c_row + j * p_.c_col];
    }
    for (const Step& s : steps_)
      apply_step(s, s.operand < 0 ? nullptr : static_cast<const float*>(operands[size_t(s.operand)].data), out, m, n);
  }

 private:
  MatmulProblem p_;
  std::vector<Step> steps_;
  int output_slot_;
};

}  // namespace

std::unique_ptr<HostKernel> make_small_matmul(const OpRun& fused, std::span<const EpilogueStep> epilogue) {
  if (fused.kind != OpKind::MatMul && fused.kind != OpKind::Linear && fused.kind != OpKind::Gemm) return nullptr;
  if (fused.outputs.size() != 1 || fused.outputs[0].dtype != DType::F32) return nullptr;
  size_t operands = 0;  // the epilogue's, after the op's own inputs
  for (const EpilogueStep& e : epilogue) operands += e.operand >= 0;
  const OpRun run{fused.kind, fused.attrs, fused.inputs.first(fused.inputs.size() - operands), fused.outputs};
  for (const BufferView& v : run.inputs)
    if (v.dtype != DType::F32) return nullptr;
  std::optional<MatmulProblem> p = decode_matmul(run);
  if (p) fold_batch_into_rows(*p);
  if (!p || p->batch() != 1 || p->trans_a || p->alpha != 1.0 || p->m == 0 || p->n == 0 || p->k == 0 ||
      p->m > (p->trans_b ? 1 : kSmallMatmulRows) || (!p->trans_b && double(p->flops()) >= kSmallMatmulFlops))
    return nullptr;
  if (p->has_c && !run.inputs[2].row_major()) return nullptr;
  std::vector<Step> steps;
  for (const EpilogueStep& e : epilogue) {
    Step s{e.kind, e.operand, e.operand_first};
    if (e.operand < 0) {
      if (e.kind != OpKind::Relu && e.kind != OpKind::Neg) return nullptr;
    } else {
      const bool binary = e.kind == OpKind::Add || e.kind == OpKind::Sub || e.kind == OpKind::Mul ||
                          e.kind == OpKind::Div || e.kind == OpKind::Maximum || e.kind == OpKind::Minimum;
      const BufferView& result = run.outputs[0];
      std::optional<OperandSpread> spread =
          operand_spread(fused.inputs[size_t(e.operand)], result, result.dims.size() - 1);
      if (!binary || !spread) return nullptr;
      s.spread = *spread;
    }
    steps.push_back(s);
  }
  return std::make_unique<SmallMatmul>(*p, std::move(steps), int(fused.inputs.size()));
}

}  // namespace kiln::cpu
