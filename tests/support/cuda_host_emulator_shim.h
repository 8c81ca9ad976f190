// Included first by every kernel library the CUDA host emulator compiles: maps the CUDA C that
// kiln emits (qualifiers, built-in indices, barriers, warp shuffles, intrinsics) onto host C++, so
// the same source runs on the CPU. Not part of kiln: host compiler input only.
#pragma once

#ifdef KILN_EMU_HAVE_CUDA_HEADERS
#include <cuda_fp16.h>  // its host half type: the same conversions the device uses
#endif
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cuda_host_emulator_abi.h"

#ifndef KILN_EMU_HAVE_CUDA_HEADERS
struct uint3 {
  unsigned x, y, z;
};
typedef uint3 dim3;
#endif

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __shared__
#undef __constant__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
// One block runs at a time on an OS thread (its threads are fibers there), so per-OS-thread
// statics are per-block shared memory.
#define __shared__ static thread_local
#define __constant__ static
#define __align__(n) alignas(n)

extern thread_local KilnEmuThread* kiln_emu_self;
#define threadIdx (kiln_emu_self->thread_idx)
#define blockIdx (kiln_emu_self->block_idx)
#define blockDim (kiln_emu_self->block_dim)
#define gridDim (kiln_emu_self->grid_dim)
#define warpSize 32

inline void __syncthreads() { kiln_emu_self->hooks->syncthreads(kiln_emu_self); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  kiln_emu_self->hooks->warp_exchange(kiln_emu_self, mask, 0);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() {}

// --- warp shuffles and votes ------------------------------------------------------------------

template <class T>
inline unsigned long long kiln_emu_bits(const T& v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8 bytes");
  unsigned long long b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}

// Every lane exchanges (the hardware does), then reads lane `src`, or keeps its own value for -1.
template <class T>
inline T kiln_emu_shfl(unsigned mask, T v, int src) {
  const unsigned long long* slots = kiln_emu_self->hooks->warp_exchange(kiln_emu_self, mask, kiln_emu_bits(v));
  if (src < 0 || src > 31) return v;
  T out;
  std::memcpy(&out, &slots[src], sizeof out);
  return out;
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  int lane = int(kiln_emu_self->lane);
  return kiln_emu_shfl(mask, v, (lane & ~(width - 1)) + (((src_lane % width) + width) % width));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  int lane = int(kiln_emu_self->lane);
  int src = lane ^ lane_mask;
  return kiln_emu_shfl(mask, v, src >= (lane / width + 1) * width ? -1 : src);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = int(kiln_emu_self->lane);
  return kiln_emu_shfl(mask, v, (lane % width) + int(delta) >= width ? -1 : lane + int(delta));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = int(kiln_emu_self->lane);
  return kiln_emu_shfl(mask, v, (lane % width) < int(delta) ? -1 : lane - int(delta));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  const unsigned long long* slots = kiln_emu_self->hooks->warp_exchange(kiln_emu_self, mask, pred != 0);
  unsigned out = 0;
  for (int l = 0; l < 32; ++l)
    if (((mask >> l) & 1u) && slots[l]) out |= 1u << l;
  return out;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == __ballot_sync(mask, 1); }
inline unsigned __activemask() { return 0xffffffffu; }

// --- arithmetic intrinsics --------------------------------------------------------------------

inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long u) { double f; std::memcpy(&f, &u, 8); return f; }
inline long long __double_as_longlong(double f) { long long u; std::memcpy(&u, &f, 8); return u; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T>
inline T __ldg(const T* p) { return *p; }

// CUDA's overloaded min/max (the device library's, not std::'s).
#define KILN_EMU_MINMAX(T)                               \
  inline T min(T a, T b) { return a < b ? a : b; }       \
  inline T max(T a, T b) { return a > b ? a : b; }
KILN_EMU_MINMAX(int)
KILN_EMU_MINMAX(unsigned)
KILN_EMU_MINMAX(long)
KILN_EMU_MINMAX(unsigned long)
KILN_EMU_MINMAX(long long)
KILN_EMU_MINMAX(unsigned long long)
#undef KILN_EMU_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// --- atomics (blocks may run on several OS threads) -------------------------------------------

template <class T>
inline T atomicAdd(T* p, T v) {
  if constexpr (std::is_integral_v<T>) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
  } else {
    T old = *p, next;
    do {
      next = T(old + v);
    } while (!__atomic_compare_exchange(p, &old, &next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
  }
}
template <class T>
inline T atomicMax(T* p, T v) { return __atomic_fetch_max(p, v, __ATOMIC_RELAXED); }
template <class T>
inline T atomicMin(T* p, T v) { return __atomic_fetch_min(p, v, __ATOMIC_RELAXED); }
template <class T>
inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <class T>
inline T atomicCAS(T* p, T expected, T desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}

// --- entry trampolines ------------------------------------------------------------------------

// Calls a kernel with cuLaunchKernel-style arguments: args[i] points to parameter i's value.
template <class... P, size_t... I>
inline void kiln_emu_call(void (*f)(P...), void** args, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<P>*>(args[I])...);
}
template <class... P>
inline void kiln_emu_invoke(void (*f)(P...), void** args) {
  kiln_emu_call(f, args, std::index_sequence_for<P...>{});
}
