// f32 2-d convolution (1-d runs with height 1) as an implicit GEMM for software devices (lavapipe),
// reading the input and the weights as rgba32f texels: there a storage-buffer load is a loop over
// the SIMD lanes and a texel read one gather of 4 floats, so the count of gathers per FMA decides the
// speed (BENCHMARKS.md). Compiled at run time with the variant's #defines prepended
// (backends/vulkan/vulkan_conv_template.cpp); no #version here.
//   KH, KW      kernel taps        SW, DW   width stride and dilation (compile time: span sizes)
//   TM, TN      register tile: TM adjacent output pixels of one row by TN output channels (WG_Y
//               apart)
//   WG_X, WG_Y  workgroup size: WG_X row segments by WG_Y channel lanes
//   HAS_BIAS    add bias[o]
// Per input channel, each invocation gathers the input row span its TM pixels read (KH rows) and
// the KH * KW weights of its TN channels, then does TM * TN * KH * KW FMAs. The planner requires
// channels per group to be a multiple of 4, so every 4 input channels of a weight row start on a
// texel and the unrolled channel loop finds each weight at a compile-time texel and component.
#extension GL_EXT_scalar_block_layout : enable
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = WG_X, local_size_y = WG_Y, local_size_z = 1) in;

layout(binding = 0, rgba32f) uniform readonly imageBuffer x_vec;
layout(binding = 1, rgba32f) uniform readonly imageBuffer w_vec;
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

#define TAPS (KH * KW)
// Input floats of one row that TM pixels read, loaded by shaders/row_span.glsl (inserted below).
#define SPAN ((TM - 1) * SW + (KW - 1) * DW + 1)
#define TEXEL 1
// KILN_ROW_SPAN

// Texels that cover one input channel's TAPS weights from any offset 0-3.
#define W_TEXELS ((TAPS + 6) / 4)

// gl_WorkGroupID: x = block of row segments, y = channel block, z = image * groups + group.
void main() {
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int z = int(gl_WorkGroupID.z);
  const int img = z / p.groups, g = z - img * p.groups;
  const int segments = (p.OW + TM - 1) / TM;  // TM-pixel segments per output row
  const int segment = int(gl_WorkGroupID.x) * WG_X + tx;
  if (segment >= p.OH * segments) return;  // no barriers below
  const int oh = segment / segments, ow0 = (segment - oh * segments) * TM;
  const int n0 = int(gl_WorkGroupID.y) * (WG_Y * TN) + ty;
  const int plane_size = p.H * p.W;
  const int x_first = (img * p.C + g * p.cg) * plane_size;
  const int iw_first = ow0 * SW - p.PW;

  // The first texel of each output channel's weight row (cg * TAPS floats, a multiple of 4). Clamped
  // channels keep every gather in range; their duplicates are never stored.
  int w_row[TN];
  for (int j = 0; j < TN; ++j) w_row[j] = (g * p.og + min(n0 + j * WG_Y, p.og - 1)) * (p.cg * TAPS / 4);

  float acc[TM][TN];
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (int c_block = 0; c_block < p.cg; c_block += 4) {
    [[unroll]] for (int c4 = 0; c4 < 4; ++c4) {
      // This channel's weights start W_SHIFT floats into texel w_texel of each row (compile time).
      const int W_SHIFT = (c4 * TAPS) & 3;
      const int w_texel = (c_block * TAPS + c4 * TAPS) >> 2;
      float wv[TN][TAPS];
      [[unroll]] for (int j = 0; j < TN; ++j) {
        float f[W_TEXELS * 4];
        [[unroll]] for (int q = 0; q < W_TEXELS; ++q) {
          const vec4 t = imageLoad(w_vec, w_row[j] + w_texel + q);
          f[4 * q] = t.x; f[4 * q + 1] = t.y; f[4 * q + 2] = t.z; f[4 * q + 3] = t.w;
        }
        [[unroll]] for (int tap = 0; tap < TAPS; ++tap) wv[j][tap] = f[W_SHIFT + tap];
      }

      const int plane = x_first + (c_block + c4) * plane_size;
      [[unroll]] for (int ki = 0; ki < KH; ++ki) {
        const int ih = oh * p.SH - p.PH + ki * p.DH;
        const bool row_ok = ih >= 0 && ih < p.H;
        float span[SPAN];
        load_row_span(plane + ih * p.W, iw_first, p.W, row_ok, 0.0, span);
        [[unroll]] for (int kj = 0; kj < KW; ++kj)
          [[unroll]] for (int i = 0; i < TM; ++i)
            [[unroll]] for (int j = 0; j < TN; ++j)
              acc[i][j] = fma(span[i * SW + kj * DW], wv[j][ki * KW + kj], acc[i][j]);
      }
    }
  }

  const int out_row = oh * p.OW;
  for (int j = 0; j < TN; ++j) {
    const int n = n0 + j * WG_Y;
    if (n >= p.og) continue;
    const int o = g * p.og + n;
#if HAS_BIAS
    const float b = bias_data[o];
#else
    const float b = 0.0;
#endif
    const int out_first = (img * p.O + o) * p.OH * p.OW + out_row;
    for (int i = 0; i < TM; ++i)
      if (ow0 + i < p.OW) out_data[out_first + ow0 + i] = EPILOGUE(acc[i][j] + b, out_first + ow0 + i, o);
  }
}
