// Row-wise f32 kernels, one block per row of N contiguous elements: sum / mean / max / min of the
// row, softmax / log_softmax of the row, layer_norm of the row. Threads stride through the row and
// combine through warp shuffles and one shared word per warp (common.cuh). The planner prepends:
//   OP        0 sum, 1 mean, 2 max, 3 min, 4 softmax, 5 log_softmax, 6 layer_norm
//   THREADS   block size, a multiple of 32
//   HAS_WEIGHT, HAS_BIAS   (layer_norm) scale and shift per element of the row
// Semantics follow the cpu reference: NaN wins max/min (so a row with a NaN softmaxes to NaN),
// layer_norm takes the mean, then the mean squared deviation (biased), then 1 / sqrt(var + eps).

#define OP_SUM 0
#define OP_MEAN 1
#define OP_MAX 2
#define OP_MIN 3
#define OP_SOFTMAX 4
#define OP_LOG_SOFTMAX 5
#define OP_LAYER_NORM 6

// Mirrors CudaRowParams in cuda_templates.cpp.
struct RowParams {
  int rows, n;
  float eps;
};

template <int C>
__device__ inline float kiln_row_reduce(const float* x, int n, float* scratch) {
  float v = kiln_identity<C>();
  for (int i = int(threadIdx.x); i < n; i += THREADS) v = kiln_combine<C>(v, x[i]);
  return kiln_block_reduce<C>(v, scratch, THREADS);
}

extern "C" __global__ void __launch_bounds__(THREADS) kiln_rows_f32(const float* x,
#if OP == OP_LAYER_NORM && HAS_WEIGHT
                                                                    const float* weight,
#endif
#if OP == OP_LAYER_NORM && HAS_BIAS
                                                                    const float* bias,
#endif
                                                                    float* y, RowParams p) {
  __shared__ float scratch[32];
  const int row = int(blockIdx.x);
  const int n = p.n;
  const float* xr = x + row * n;
#if OP == OP_SUM || OP == OP_MEAN
  const float s = kiln_row_reduce<KILN_SUM>(xr, n, scratch);
  if (threadIdx.x == 0) y[row] = OP == OP_MEAN ? s / float(n) : s;
#elif OP == OP_MAX || OP == OP_MIN
  const float s = kiln_row_reduce<OP == OP_MAX ? KILN_MAX : KILN_MIN>(xr, n, scratch);
  if (threadIdx.x == 0) y[row] = s;
#elif OP == OP_SOFTMAX || OP == OP_LOG_SOFTMAX
  // Shifted by the row's max so large inputs do not overflow.
  const float mx = kiln_row_reduce<KILN_MAX>(xr, n, scratch);
  float part = 0.0f;
  for (int i = int(threadIdx.x); i < n; i += THREADS) part += expf(xr[i] - mx);
  const float sum = kiln_block_reduce<KILN_SUM>(part, scratch, THREADS);
  float* yr = y + row * n;
#if OP == OP_SOFTMAX
  const float inv = 1.0f / sum;
  for (int i = int(threadIdx.x); i < n; i += THREADS) yr[i] = expf(xr[i] - mx) * inv;
#else
  const float log_sum = logf(sum);
  for (int i = int(threadIdx.x); i < n; i += THREADS) yr[i] = xr[i] - mx - log_sum;
#endif
#elif OP == OP_LAYER_NORM
  const float mean = kiln_row_reduce<KILN_SUM>(xr, n, scratch) / float(n);
  float part = 0.0f;
  for (int i = int(threadIdx.x); i < n; i += THREADS) {
    const float d = xr[i] - mean;
    part = fmaf(d, d, part);
  }
  const float var = kiln_block_reduce<KILN_SUM>(part, scratch, THREADS) / float(n);
  const float rstd = 1.0f / sqrtf(var + p.eps);
  float* yr = y + row * n;
  for (int i = int(threadIdx.x); i < n; i += THREADS) {
    float v = (xr[i] - mean) * rstd;
#if HAS_WEIGHT
    v *= weight[i];
#endif
#if HAS_BIAS
    v += bias[i];
#endif
    yr[i] = v;
  }
#endif
}
