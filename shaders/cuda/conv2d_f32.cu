// f32 conv (NCHW, groups, stride, padding, dilation, optional bias) as an implicit GEMM on the SIMT
// cores: per (image, group), out[o][pixel] = sum over k = (c, kh, kw) of W[o][k] * X(k, pixel),
// with the im2col matrix X read straight from the input (zero outside it). GEMM rows are output
// channels and columns are pixels, so neighbouring threads store neighbouring pixels. The planner
// prepends the defines (KH, KW, HAS_BIAS, the tile), common.cuh and gemm_tile.cuh.
// Grid: x = pixel tiles, y = channel tiles of a group, z = image * groups + group.

// Mirrors ConvParams in backends/conv_problem.h.
struct ConvParams {
  int c, h, w;     // input channels and size
  int o, oh, ow;   // output channels and size
  int cg, og;      // channels per group, in and out
  int groups;
  int sh, sw, ph, pw, dh, dw;
};

struct ConvLoader {
  const float* x;
  const float* wt;
  ConvParams p;
  int x_base, w_base;  // this (image, group)'s first input element and first filter element
  // A = the group's filters, [og, cg * KH * KW] row-major.
  __device__ bool a(int o, int k, const float*& src) const {
    const bool ok = o < p.og && k < p.cg * KH * KW;
    src = ok ? wt + w_base + o * (p.cg * KH * KW) + k : wt;
    return ok;
  }
  // B = im2col: row k = (c, kh, kw), column = output pixel.
  __device__ bool b(int k, int pixel, const float*& src) const {
    const int c = k / (KH * KW), r = k - c * (KH * KW);
    const int kh = r / KW, kw = r - kh * KW;
    const int oy = pixel / p.ow, ox = pixel - oy * p.ow;
    const int iy = oy * p.sh - p.ph + kh * p.dh, ix = ox * p.sw - p.pw + kw * p.dw;
    const bool ok = c < p.cg && oy < p.oh && iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
    src = ok ? x + x_base + (c * p.h + iy) * p.w + ix : x;
    return ok;
  }
};

// A fused epilogue (backends/template_epilogue.cpp) is declared here: EPILOGUE(v, index, channel),
// the value to store for result v at that output element, and its operands' parameters.
// KILN_EPILOGUE
#ifndef EPILOGUE
#define EPILOGUE(v, index, channel) (v)
#define KILN_EPILOGUE_PARAMS
#endif

extern "C" __global__ void __launch_bounds__(THREADS) kiln_conv2d_f32(const float* x, const float* wt,
#if HAS_BIAS
                                                                      const float* bias,
#endif
                                                                      float* out KILN_EPILOGUE_PARAMS, ConvParams p) {
  __shared__ float sa[2][BK][BM + 1];
  __shared__ float sb[2][BK][BN + 1];
  const int z = int(blockIdx.z);
  const int image = z / p.groups, g = z - image * p.groups;
  ConvLoader ld{x, wt, p, (image * p.c + g * p.cg) * p.h * p.w, g * p.og * p.cg * KH * KW};
  const int row0 = int(blockIdx.y) * BM, col0 = int(blockIdx.x) * BN;
  float acc[TM][TN];
  kiln_gemm_tile(ld, row0, col0, p.cg * KH * KW, sa, sb, acc);

  const int tx = int(threadIdx.x) % WG_X, ty = int(threadIdx.x) / WG_X;
  const int pixels = p.oh * p.ow;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int o = row0 + ty + i * WG_Y;
    if (o >= p.og) continue;
    const int channel = g * p.og + o;
#if HAS_BIAS
    const float shift = bias[channel];
#else
    const float shift = 0.0f;
#endif
    float* dst = out + (image * p.o + channel) * pixels;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int pixel = col0 + tx + j * WG_X;
      if (pixel < pixels) dst[pixel] = EPILOGUE(acc[i][j] + shift, (image * p.o + channel) * pixels + pixel, channel);
    }
  }
}
