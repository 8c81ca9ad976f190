// Helpers every CUDA template starts with (the planner prepends this file after the variant's
// #defines): infinity, element copies into shared memory (cp.async on sm_80+ when ASYNC is 1,
// plain loads otherwise) and warp-shuffle reductions over a block.
#ifndef KILN_INF
#define KILN_INF __int_as_float(0x7f800000)
#endif
#ifndef ASYNC
#define ASYNC 0
#endif

// Copies one float into shared memory, or stores 0 when !ok (src is then never read, but must be a
// valid address for cp.async: callers pass the operand's base pointer).
__device__ inline void kiln_copy_f32(float* dst, const float* src, bool ok) {
#if ASYNC
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
#else
  *dst = ok ? *src : 0.0f;
#endif
}

// Ends a stage of copies; waits until all but the latest `pending` stages have landed.
__device__ inline void kiln_copy_commit() {
#if ASYNC
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ inline void kiln_copy_wait_all_but_one() {
#if ASYNC
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}
__device__ inline void kiln_copy_wait_all() {
#if ASYNC
  asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// NaN wins, as in the cpu reference: a + b is NaN when either is.
__device__ inline float kiln_max_nan(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
__device__ inline float kiln_min_nan(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }

enum KilnCombine { KILN_SUM = 0, KILN_MAX = 1, KILN_MIN = 2 };

template <int C>
__device__ inline float kiln_combine(float a, float b) {
  return C == KILN_SUM ? a + b : C == KILN_MAX ? kiln_max_nan(a, b) : kiln_min_nan(a, b);
}

template <int C>
__device__ inline float kiln_identity() {
  return C == KILN_SUM ? 0.0f : C == KILN_MAX ? -KILN_INF : KILN_INF;
}

template <int C>
__device__ inline float kiln_warp_reduce(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = kiln_combine<C>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The combination of every thread's `v` in a block of `threads` (a multiple of 32), returned to
// all of them. `scratch` holds one value per warp; the leading barrier lets the block call this
// again right after a previous reduction.
template <int C>
__device__ inline float kiln_block_reduce(float v, float* scratch, int threads) {
  v = kiln_warp_reduce<C>(v);
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < threads / 32 ? scratch[lane] : kiln_identity<C>();
  return kiln_warp_reduce<C>(v);
}
