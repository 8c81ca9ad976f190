// Decoding of matmul / linear / gemm into MatmulProblem: numpy batch broadcasting reduced to two
// strided batch dims, linear's bias as a broadcast C, gemm's transposes and alpha/beta.
#include "backends/matmul_problem.h"

#include <climits>
#include <vector>

#include "backends/template_util.h"

namespace kiln {
namespace {

// An operand's element strides: its own, or row-major ones.
std::vector<int64_t> strides_of(const BufferView& v) {
  if (!v.row_major()) return v.strides;
  std::vector<int64_t> s(v.dims.size(), 1);
  for (size_t i = v.dims.size(); i-- > 1;) s[i - 1] = s[i] * v.dims[i];
  return s;
}

// numpy batch broadcasting reduced to at most two (extent, a stride, b stride) dims; false when
// the broadcast pattern needs more. An operand's batch strides are right-aligned to the output's
// batch dims, 0 where it broadcasts.
bool batch_dims(const std::vector<int64_t>& a_batch, const std::vector<int64_t>& a_strides,
                const std::vector<int64_t>& b_batch, const std::vector<int64_t>& b_strides,
                const std::vector<int64_t>& out_batch, MatmulProblem& p) {
  struct Dim {
    int64_t extent, a_stride, b_stride;
  };
  auto aligned = [&out_batch](const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
    std::vector<int64_t> s(out_batch.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i) s[out_batch.size() - dims.size() + i] = dims[i] == 1 ? 0 : strides[i];
    return s;
  };
  std::vector<int64_t> as = aligned(a_batch, a_strides);
  std::vector<int64_t> bs = aligned(b_batch, b_strides);
  std::vector<Dim> dims;
  for (size_t i = 0; i < out_batch.size(); ++i) {
    if (out_batch[i] == 1) continue;
    Dim d{out_batch[i], as[i], bs[i]};
    // Merge with the previous dim when both operands step through them as one.
    if (!dims.empty() && dims.back().a_stride == d.a_stride * d.extent &&
        dims.back().b_stride == d.b_stride * d.extent) {
      dims.back() = {dims.back().extent * d.extent, d.a_stride, d.b_stride};
      continue;
    }
    dims.push_back(d);
  }
  if (dims.size() > 2) return false;
  if (dims.size() == 2) {
    p.batch0 = dims[0].extent;
    p.a_batch0 = dims[0].a_stride;
    p.b_batch0 = dims[0].b_stride;
  }
  if (!dims.empty()) {
    p.batch1 = dims.back().extent;
    p.a_batch1 = dims.back().a_stride;
    p.b_batch1 = dims.back().b_stride;
  }
  return true;
}

// How a [rows, cols] matrix with these element strides is stored: row-major with a leading dim
// (the row stride), or transposed (the column stride); nothing when neither dim has stride 1.
struct MatrixLayout {
  bool transposed = false;
  int64_t ld = 0;
};
std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride > 0))
    return MatrixLayout{false, rows == 1 ? cols : row_stride};
  if ((row_stride == 1 || rows == 1) && col_stride > 0) return MatrixLayout{true, col_stride};
  return std::nullopt;  // neither dim contiguous, or rows repeated (stride 0)
}

std::optional<MatmulProblem> matmul_problem(const OpRun& run) {
  const auto& a = run.inputs[0].dims;
  const auto& b = run.inputs[1].dims;
  const auto& out = run.outputs[0].dims;
  const std::vector<int64_t> sa = strides_of(run.inputs[0]), sb = strides_of(run.inputs[1]);
  MatmulProblem p;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  p.m = a_vec ? 1 : a[a.size() - 2];
  p.k = a.back();
  p.n = b_vec ? 1 : b.back();
  // A 1-d A is one row [1, K]; a 1-d B one column [K, 1].
  std::optional<MatrixLayout> la = matrix_layout(p.m, p.k, a_vec ? 0 : sa[a.size() - 2], sa.back());
  std::optional<MatrixLayout> lb = matrix_layout(p.k, p.n, b_vec ? sb.back() : sb[b.size() - 2], b_vec ? 0 : sb.back());
  if (!la || !lb) return std::nullopt;
  p.trans_a = la->transposed;
  p.lda = la->ld;
  p.trans_b = lb->transposed;
  p.ldb = lb->ld;
  p.a_offset = run.inputs[0].offset;
  p.b_offset = run.inputs[1].offset;
  const size_t a_batch_rank = a.size() - (a_vec ? 1 : 2), b_batch_rank = b.size() - (b_vec ? 1 : 2);
  const size_t out_batch_rank = out.size() - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  if (!batch_dims({a.begin(), a.begin() + long(a_batch_rank)}, {sa.begin(), sa.begin() + long(a_batch_rank)},
                  {b.begin(), b.begin() + long(b_batch_rank)}, {sb.begin(), sb.begin() + long(b_batch_rank)},
                  {out.begin(), out.begin() + long(out_batch_rank)}, p))
    return std::nullopt;
  return p;
}

std::optional<MatmulProblem> linear_problem(const OpRun& run) {
  const auto& x = run.inputs[0].dims;
  const auto& w = run.inputs[1].dims;
  MatmulProblem p;
  p.k = x.back();
  p.n = w[0];
  p.m = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) p.m *= x[i];
  p.trans_b = true;
  p.lda = p.ldb = p.k;
  if (run.inputs.size() == 3) {
    const auto& bias = run.inputs[2].dims;
    int64_t bias_numel = 1;
    for (int64_t d : bias) bias_numel *= d;
    // A bias along N (or a scalar) is the common case; other broadcasts keep the generic kernel.
    for (size_t i = 0; i + 1 < bias.size(); ++i)
      if (bias[i] != 1) return std::nullopt;
    p.has_c = true;
    p.c_col = bias_numel == 1 ? 0 : 1;
  }
  return p;
}

std::optional<MatmulProblem> gemm_problem(const OpRun& run) {
  const auto& a = run.inputs[0].dims;
  MatmulProblem p;
  p.trans_a = run.attrs.get_bool("trans_a");
  p.trans_b = run.attrs.get_bool("trans_b");
  p.alpha = run.attrs.get_float("alpha");
  p.beta = run.attrs.get_float("beta");
  p.m = run.outputs[0].dims[0];
  p.n = run.outputs[0].dims[1];
  p.k = p.trans_a ? a[0] : a[1];
  p.lda = p.trans_a ? p.m : p.k;
  p.ldb = p.trans_b ? p.k : p.n;
  if (run.inputs.size() == 3 && p.beta != 0.0) {
    const auto& c = run.inputs[2].dims;
    int64_t cm = c.size() >= 2 ? c[c.size() - 2] : 1;
    int64_t cn = c.empty() ? 1 : c.back();
    p.has_c = true;
    p.c_row = cm == 1 ? 0 : cn;
    p.c_col = cn == 1 ? 0 : 1;
  }
  return p;
}

}  // namespace

bool fold_batch_into_rows(MatmulProblem& p) {
  if (p.batch() == 1 || p.trans_a || p.b_batch0 != 0 || p.b_batch1 != 0 || (p.has_c && p.c_row != 0)) return false;
  const int64_t row = p.m > 1 ? p.lda : (p.batch1 > 1 ? p.a_batch1 : p.a_batch0);  // from one row to the next
  if (row < p.k || (p.batch1 > 1 && p.a_batch1 != p.m * row) || (p.batch0 > 1 && p.a_batch0 != p.batch1 * p.m * row))
    return false;
  p.m *= p.batch();
  p.lda = row;
  p.batch0 = p.batch1 = 1;
  p.a_batch0 = p.a_batch1 = 0;
  return true;
}

std::optional<MatmulProblem> decode_matmul(const OpRun& run) {
  if (run.inputs.size() < 2 || run.outputs.size() != 1) return std::nullopt;
  for (const BufferView& v : run.inputs) {
    if (v.row_major()) continue;
    if (run.kind != OpKind::MatMul || v.strides.size() != v.dims.size() || v.offset < 0) return std::nullopt;
    for (int64_t stride : v.strides)
      if (stride < 0) return std::nullopt;
  }
  switch (run.kind) {
    case OpKind::MatMul: return matmul_problem(run);
    case OpKind::Linear: return linear_problem(run);
    case OpKind::Gemm: return gemm_problem(run);
    default: return std::nullopt;
  }
}

bool matmul_fits_i32(const MatmulProblem& p) {
  // The last element each operand's indexing reaches, plus one (views read in place may skip).
  const int64_t a_end = p.a_offset + (p.batch0 - 1) * p.a_batch0 + (p.batch1 - 1) * p.a_batch1 +
                        (p.trans_a ? (p.k - 1) * p.lda + p.m : (p.m - 1) * p.lda + p.k);
  const int64_t b_end = p.b_offset + (p.batch0 - 1) * p.b_batch0 + (p.batch1 - 1) * p.b_batch1 +
                        (p.trans_b ? (p.n - 1) * p.ldb + p.k : (p.k - 1) * p.ldb + p.n);
  const int64_t batch = p.batch();
  for (int64_t v : {p.m * p.k * batch, p.k * p.n * batch, p.m * p.n * batch, a_end, b_end})
    if (!templates::fits_i32(v)) return false;
  return true;
}

MatmulParams matmul_params(const MatmulProblem& p) {
  MatmulParams q{};
  q.m = int32_t(p.m);
  q.n = int32_t(p.n);
  q.k = int32_t(p.k);
  q.lda = int32_t(p.lda);
  q.ldb = int32_t(p.ldb);
  q.ldo = int32_t(p.n);
  q.batch1 = int32_t(p.batch1);
  q.a_batch0 = int32_t(p.a_batch0);
  q.a_batch1 = int32_t(p.a_batch1);
  q.b_batch0 = int32_t(p.b_batch0);
  q.b_batch1 = int32_t(p.b_batch1);
  q.c_row = int32_t(p.c_row);
  q.c_col = int32_t(p.c_col);
  q.alpha = float(p.alpha);
  q.beta = float(p.beta);
  q.a_offset = int32_t(p.a_offset);
  q.b_offset = int32_t(p.b_offset);
  return q;
}

}  // namespace kiln
