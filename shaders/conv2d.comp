// f32 2-d convolution (1-d runs with height 1) as an implicit GEMM, compiled at run time with the
// variant's #defines prepended (backends/vulkan/vulkan_conv_template.cpp); no #version here.
// Per (image, group): M = output pixels, N = output channels of the group, K = C/groups * KH * KW;
// A[m][k] is gathered from the input window (never materialized), B is the weight [O, C/g, KH, KW].
//   KH, KW      kernel taps (compile time, so the tap loops unroll)
//   TM, TN      register tile of one invocation: TM pixels (WG_X apart, so neighbouring lanes
//               store neighbouring pixels) by TN channels (WG_Y apart)
//   WG_X, WG_Y  workgroup size; a workgroup covers BM = WG_X * TM pixels, BN = WG_Y * TN channels
//   POINTWISE   1x1 kernel, stride 1, no padding: A is the input planes themselves (no bounds checks)
//   DEPTHWISE   one input channel per group: each invocation computes TM adjacent pixels of one
//               output row, loading the input row span they share once per kernel row (SW, DW
//               compile time); WG_Y, TN unused
//   HAS_BIAS    add bias[o]
//   USE_SHARED  GPUs: each step of BK along K stages the workgroup's A tile (gathered from the
//               input windows) and B tile (weights) through shared memory, so the workgroup reads
//               each element once instead of every invocation that uses it reading it
// Otherwise loads are direct from the storage buffers: on CPU devices (lavapipe) every load is a
// per-lane scalar loop, so the register tile's loads-per-FMA ratio decides the speed, and shared
// memory would only add loads and barriers. Out-of-input taps load a clamped in-range index, then
// select 0.
#extension GL_EXT_scalar_block_layout : enable

layout(local_size_x = WG_X, local_size_y = WG_Y, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer BufX { float x_data[]; };
layout(std430, binding = 1) readonly buffer BufW { float w_data[]; };
#if HAS_BIAS
layout(std430, binding = 2) readonly buffer BufBias { float bias_data[]; };
layout(std430, binding = 3) writeonly buffer BufOut { float out_data[]; };
#else
layout(std430, binding = 2) writeonly buffer BufOut { float out_data[]; };
#endif

// A fused epilogue (backends/template_epilogue.cpp) is declared here: its operands' buffers and
// EPILOGUE(v, index, channel), the value to store for result v at that output element.
// KILN_EPILOGUE
#ifndef EPILOGUE
#define EPILOGUE(v, index, channel) (v)
#endif

// Mirrors ConvParams in backends/conv_problem.h.
layout(push_constant, scalar) uniform Params {
  int C, H, W;        // input channels (all groups) and spatial size
  int O, OH, OW;      // output channels (all groups) and spatial size
  int cg, og;         // input / output channels per group
  int groups;
  int SH, SWD, PH, PW, DH, DWD;  // stride, leading padding, dilation (SW, DW are the defines' names)
} p;

#if DEPTHWISE
// gl_WorkGroupID: x = row segment block, y = output row, z = image * O + output channel.
void main() {
  const int z = int(gl_WorkGroupID.z);
  const int img = z / p.O, o = z - img * p.O;
  const int c = o / p.og;  // cg == 1: output channel o reads input channel o / og
  const int oh = int(gl_WorkGroupID.y);
  const int ow0 = (int(gl_WorkGroupID.x) * WG_X + int(gl_LocalInvocationID.x)) * TM;
  if (ow0 >= p.OW) return;
  const int plane = (img * p.C + c) * p.H * p.W;
  const int iw_first = ow0 * SW - p.PW;
  const int SPAN = (TM - 1) * SW + (KW - 1) * DW + 1;
  float acc[TM];
#if HAS_BIAS
  const float b = bias_data[o];
#else
  const float b = 0.0;
#endif
  for (int t = 0; t < TM; ++t) acc[t] = b;
  for (int i = 0; i < KH; ++i) {
    const int ih = oh * p.SH - p.PH + i * p.DH;
    if (ih < 0 || ih >= p.H) continue;  // uniform across the workgroup's row
    const int row = plane + ih * p.W;
    float span[SPAN];
    for (int s = 0; s < SPAN; ++s) {
      const int iw = iw_first + s;
      const bool ok = iw >= 0 && iw < p.W;
      const float v = x_data[row + (ok ? iw : 0)];
      span[s] = ok ? v : 0.0;
    }
    for (int j = 0; j < KW; ++j) {
      const float wv = w_data[(o * KH + i) * KW + j];
      for (int t = 0; t < TM; ++t) acc[t] = fma(span[t * SW + j * DW], wv, acc[t]);
    }
  }
  const int out_row = (z * p.OH + oh) * p.OW;
  for (int t = 0; t < TM; ++t)
    if (ow0 + t < p.OW) out_data[out_row + ow0 + t] = EPILOGUE(acc[t], out_row + ow0 + t, o);
}
#else
#if USE_SHARED
#define BM (WG_X * TM)
#define BN (WG_Y * TN)
shared float tile_a[BK][BM + 1];  // [k][pixel]; +1: transposed stores do not hit one bank
shared float tile_b[BK][BN + 1];  // [k][channel]
#endif

// gl_WorkGroupID: x = pixel block, y = channel block, z = image * groups + group.
void main() {
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int z = int(gl_WorkGroupID.z);
  const int img = z / p.groups, g = z - img * p.groups;
  const int M = p.OH * p.OW;
  const int m0 = int(gl_WorkGroupID.x) * (WG_X * TM), n0 = int(gl_WorkGroupID.y) * (WG_Y * TN);
  const int K = p.cg * KH * KW;
  const int plane_size = p.H * p.W;
  const int x_base = (img * p.C + g * p.cg) * plane_size;

  float acc[TM][TN];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

#if USE_SHARED
  const int tid = ty * WG_X + tx;
  const int taps = KH * KW;
  for (int k0 = 0; k0 < K; k0 += BK) {
    // Consecutive threads walk pixels (neighbouring input columns); out-of-range elements and
    // padding taps load as zero, so the inner loop needs no edge checks.
    for (int e = tid; e < BK * BM; e += WG_X * WG_Y) {
      const int kk = e / BM, mm = e - kk * BM;
      const int k = k0 + kk, m = m0 + mm;
      float v = 0.0;
      if (k < K && m < M) {
        const int c = k / taps, r = k - c * taps;
        const int ki = r / KW, kj = r - ki * KW;
        const int oh = m / p.OW;
        const int ih = oh * p.SH - p.PH + ki * p.DH;
        const int iw = (m - oh * p.OW) * p.SWD - p.PW + kj * p.DWD;
        if (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W) v = x_data[x_base + c * plane_size + ih * p.W + iw];
      }
      tile_a[kk][mm] = v;
    }
    // Consecutive threads walk K along a weight row, which is contiguous.
    for (int e = tid; e < BK * BN; e += WG_X * WG_Y) {
      const int nn = e / BK, kk = e - nn * BK;
      const int k = k0 + kk, n = n0 + nn;
      tile_b[kk][nn] = k < K && n < p.og ? w_data[(g * p.og + n) * K + k] : 0.0;
    }
    barrier();
    for (int kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      for (int i = 0; i < TM; ++i) av[i] = tile_a[kk][tx + i * WG_X];
      for (int j = 0; j < TN; ++j) bv[j] = tile_b[kk][ty + j * WG_Y];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }
#else
  // Clamped pixels and channels keep every load in range; the duplicates are never stored.
  int w_row[TN];
  for (int j = 0; j < TN; ++j) w_row[j] = (g * p.og + min(n0 + ty + j * WG_Y, p.og - 1)) * K;
#if POINTWISE
  int pix[TM];
  for (int i = 0; i < TM; ++i) pix[i] = x_base + min(m0 + tx + i * WG_X, M - 1);
#else
  int ih0[TM], iw0[TM];
  for (int i = 0; i < TM; ++i) {
    const int m = min(m0 + tx + i * WG_X, M - 1);
    const int oh = m / p.OW;
    ih0[i] = oh * p.SH - p.PH;
    iw0[i] = (m - oh * p.OW) * p.SWD - p.PW;
  }
#endif

  for (int c = 0; c < p.cg; ++c) {
#if POINTWISE
    const int xc = c * plane_size;
    float av[TM], bv[TN];
    for (int i = 0; i < TM; ++i) av[i] = x_data[pix[i] + xc];
    for (int j = 0; j < TN; ++j) bv[j] = w_data[w_row[j] + c];
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
#else
    const int xc = x_base + c * plane_size;
    for (int ki = 0; ki < KH; ++ki) {
      int row[TM];
      bool row_ok[TM];
      for (int i = 0; i < TM; ++i) {
        const int ih = ih0[i] + ki * p.DH;
        row_ok[i] = ih >= 0 && ih < p.H;
        row[i] = xc + (row_ok[i] ? ih : 0) * p.W;
      }
      for (int kj = 0; kj < KW; ++kj) {
        const int k = (c * KH + ki) * KW + kj;
        float av[TM], bv[TN];
        for (int i = 0; i < TM; ++i) {
          const int iw = iw0[i] + kj * p.DWD;
          const bool ok = row_ok[i] && iw >= 0 && iw < p.W;
          const float v = x_data[row[i] + (ok ? iw : 0)];
          av[i] = ok ? v : 0.0;
        }
        for (int j = 0; j < TN; ++j) bv[j] = w_data[w_row[j] + k];
        for (int i = 0; i < TM; ++i)
          for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
      }
    }
#endif
  }
#endif  // USE_SHARED

  for (int j = 0; j < TN; ++j) {
    const int n = n0 + ty + j * WG_Y;
    if (n >= p.og) continue;
    const int o = g * p.og + n;
#if HAS_BIAS
    const float b = bias_data[o];
#else
    const float b = 0.0;
#endif
    const int out_plane = (img * p.O + o) * M;
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + tx + i * WG_X;
      if (m < M) out_data[out_plane + m] = EPILOGUE(acc[i][j] + b, out_plane + m, o);
    }
  }
}
#endif
