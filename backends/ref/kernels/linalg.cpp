// Reference kernels for the linalg ops: matmul, gemm and linear, all on the blocked GEMM
// (f32/f64 directly, f16/bf16 through float copies, integers through a plain wrapping loop).
#include <array>
#include <type_traits>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/kernels/gemm_kernel.h"
#include "core/support/error.h"

namespace kiln::reference {
namespace {

// A batch of same-sized products described by element offsets, so one description serves every
// dtype: problem i computes out[c_i..] (+)= alpha * A(a_i..) B(b_i..).
struct ProductBatch {
  int64_t m = 0, n = 0, k = 0;
  int64_t a_row_stride = 0, a_col_stride = 1, b_row_stride = 0, b_col_stride = 1, ldc = 0;
  std::vector<std::array<int64_t, 3>> offsets;  // {a, b, c} per problem
};

template <class T>
std::vector<GemmProblem<T>> problems_of(const ProductBatch& s, const T* a, const T* b, T* c) {
  std::vector<GemmProblem<T>> out;
  out.reserve(s.offsets.size());
  for (const auto& [ao, bo, co] : s.offsets)
    out.push_back({{a + ao, s.a_row_stride, s.a_col_stride},
                   {b + bo, s.b_row_stride, s.b_col_stride},
                   c + co,
                   s.ldc});
  return out;
}

std::vector<float> to_float(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  convert_elements(t.data, t.dtype, v.data(), DType::F32, v.size());
  return v;
}

// out = alpha * A B + (accumulate ? out : 0) for every problem of the batch.
void run_products(const ProductBatch& s, const HostTensor& a, const HostTensor& b,
                  const HostTensor& out, double alpha, bool accumulate) {
  visit_dtype(out.dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      gemm_batched(problems_of(s, a.as<const T>(), b.as<const T>(), out.as<T>()), s.m, s.n, s.k,
                   T(alpha), accumulate);
    } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      std::vector<float> fa = to_float(a), fb = to_float(b), fc(size_t(out.numel()));
      if (accumulate) fc = to_float(out);
      gemm_batched(problems_of(s, fa.data(), fb.data(), fc.data()), s.m, s.n, s.k, float(alpha),
                   accumulate);
      convert_elements(fc.data(), DType::F32, out.data, out.dtype, fc.size());
    } else if constexpr (std::is_same_v<T, bool>) {
      throw Error("matrix products are not defined for bool");
    } else {
      gemm_integer(problems_of(s, a.as<const T>(), b.as<const T>(), out.as<T>()), s.m, s.n, s.k,
                   alpha, accumulate);
    }
  });
}

// out = scale * src broadcast to out's shape (the bias or C term before the product adds to it).
void fill_broadcast(const HostTensor& src, double scale, const HostTensor& out) {
  visit_dtype(out.dtype, [&]<class T>() {
    const T* in = src.as<const T>();
    T* dst = out.as<T>();
    BroadcastIndex index(src.dims, out.dims);
    index.seek(0);
    for (int64_t i = 0, n = out.numel(); i < n; ++i, index.next()) {
      if constexpr (std::is_integral_v<T>)
        dst[i] = T(int64_t(scale * double(in[index.offset()])));
      else
        dst[i] = T(compute_t<T>(scale * double(in[index.offset()])));
    }
  });
}

void matmul_kernel(const KernelContext& ctx) {
  const HostTensor& a = ctx.inputs[0];
  const HostTensor& b = ctx.inputs[1];
  const HostTensor& out = ctx.outputs[0];
  const bool a_vector = a.dims.size() == 1, b_vector = b.dims.size() == 1;
  ProductBatch s;
  s.m = a_vector ? 1 : a.dims[a.dims.size() - 2];
  s.k = a.dims.back();
  s.n = b_vector ? 1 : b.dims.back();
  s.a_row_stride = s.k;
  s.b_row_stride = s.n;
  s.ldc = s.n;
  // Batch dims: everything before the matrix dims (a 1-d operand has none).
  std::vector<int64_t> a_batch(a.dims.begin(), a.dims.end() - (a_vector ? 1 : 2));
  std::vector<int64_t> b_batch(b.dims.begin(), b.dims.end() - (b_vector ? 1 : 2));
  const size_t out_batch_rank = out.dims.size() - (a_vector ? 0 : 1) - (b_vector ? 0 : 1);
  std::vector<int64_t> out_batch(out.dims.begin(), out.dims.begin() + out_batch_rank);
  int64_t batch = 1;
  for (int64_t d : out_batch) batch *= d;
  BroadcastIndex ai(a_batch, out_batch), bi(b_batch, out_batch);
  ai.seek(0);
  bi.seek(0);
  for (int64_t i = 0; i < batch; ++i, ai.next(), bi.next())
    s.offsets.push_back({ai.offset() * s.m * s.k, bi.offset() * s.k * s.n, i * s.m * s.n});
  run_products(s, a, b, out, 1.0, false);
}

void gemm_kernel(const KernelContext& ctx) {
  const HostTensor& a = ctx.inputs[0];
  const HostTensor& b = ctx.inputs[1];
  const HostTensor& out = ctx.outputs[0];
  const bool ta = ctx.attrs.get_bool("trans_a"), tb = ctx.attrs.get_bool("trans_b");
  const double alpha = ctx.attrs.get_float("alpha"), beta = ctx.attrs.get_float("beta");
  ProductBatch s;
  s.m = out.dims[0];
  s.n = out.dims[1];
  s.k = ta ? a.dims[0] : a.dims[1];
  // A stored [M, K] has strides (K, 1); stored transposed as [K, M] it is read with (1, M).
  s.a_row_stride = ta ? 1 : s.k;
  s.a_col_stride = ta ? s.m : 1;
  s.b_row_stride = tb ? 1 : s.n;
  s.b_col_stride = tb ? s.k : 1;
  s.ldc = s.n;
  s.offsets.push_back({0, 0, 0});
  const bool with_c = ctx.inputs.size() == 3 && beta != 0.0;
  if (with_c) fill_broadcast(ctx.inputs[2], beta, out);
  run_products(s, a, b, out, alpha, with_c);
}

void linear_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const HostTensor& w = ctx.inputs[1];
  const HostTensor& out = ctx.outputs[0];
  ProductBatch s;
  s.k = x.dims.back();
  s.n = w.dims[0];
  s.m = s.k ? x.numel() / s.k : out.numel() / std::max<int64_t>(s.n, 1);
  s.a_row_stride = s.k;
  // weight is [N, K]: the B operand (k, n) lives at n * K + k.
  s.b_row_stride = 1;
  s.b_col_stride = s.k;
  s.ldc = s.n;
  s.offsets.push_back({0, 0, 0});
  const bool with_bias = ctx.inputs.size() == 3;
  if (with_bias) fill_broadcast(ctx.inputs[2], 1.0, out);
  run_products(s, x, w, out, 1.0, with_bias);
}

}  // namespace

void register_linalg(KernelTable& t) {
  t.set(OpKind::MatMul, matmul_kernel);
  t.set(OpKind::Gemm, gemm_kernel);
  t.set(OpKind::Linear, linear_kernel);
}

}  // namespace kiln::reference
