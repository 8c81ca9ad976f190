// f32 max and average pooling, 2-d (1-d runs with height 1), compiled at run time with the
// variant's #defines prepended (backends/vulkan/vulkan_pool_template.cpp); no #version here.
// Each invocation computes TM adjacent outputs of one output row of one (image, channel) plane,
// loading each window row's input span once (shaders/row_span.glsl) instead of every tap of every
// window: with stride 2 and 3 taps, 17 loads serve 8 outputs' 24 taps of that row.
//   KH, KW        window taps        SW, DW   width stride and dilation (compile time: span size)
//   TM, WG_X      outputs per invocation, invocations per workgroup (along the row)
//   MAX           1: max pool; 0: average pool
//   COUNT_PAD     average: divide by the window clipped to the padded input (count_include_pad),
//                 else clipped to the input
//   TEXEL         read the input as rgba32f texels (software devices), else from a storage buffer
#extension GL_EXT_scalar_block_layout : enable
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = WG_X, local_size_y = 1, local_size_z = 1) in;

#if TEXEL
layout(binding = 0, rgba32f) uniform readonly imageBuffer x_vec;
#else
layout(std430, binding = 0) readonly buffer BufX { float x_data[]; };
#endif
layout(std430, binding = 1) writeonly buffer BufOut { float out_data[]; };

// A fused epilogue (backends/template_epilogue.cpp) is declared here: its operands' buffers and
// EPILOGUE(v, index, channel), the value to store for result v at that output element.
// KILN_EPILOGUE
#ifndef EPILOGUE
#define EPILOGUE(v, index, channel) (v)
#endif

// Mirrors PoolParams in backends/vulkan/vulkan_pool_template.h.
layout(push_constant, scalar) uniform Params {
  int C, H, W;      // channels and input spatial size
  int OH, OW;       // output spatial size
  int SH, DH;       // height stride and dilation (SW, DW are the defines)
  int PH, PW;       // leading padding
  int PH_END, PW_END;  // trailing padding (average pool's count_include_pad divisor)
} p;

// Input floats of one row that TM outputs read, loaded by shaders/row_span.glsl (inserted below).
#define SPAN ((TM - 1) * SW + (KW - 1) * DW + 1)
// KILN_ROW_SPAN

// The average pool's divisor for the window starting at `start` along an axis of `size` elements
// with trailing padding `pad_end`: the window's taps inside the padded axis, or inside the axis.
int window_count(int start, int taps, int size, int pad_end) {
#if COUNT_PAD
  return min(start + taps, size + pad_end) - start;
#else
  return min(start + taps, size) - max(start, 0);
#endif
}

// gl_WorkGroupID: x = block of row segments, y = output row, z = image * C + channel.
void main() {
  const int plane_index = int(gl_WorkGroupID.z);
  const int oh = int(gl_WorkGroupID.y);
  const int ow0 = (int(gl_WorkGroupID.x) * WG_X + int(gl_LocalInvocationID.x)) * TM;
  if (ow0 >= p.OW) return;  // no barriers below
  const int plane = plane_index * p.H * p.W;
  const int iw_first = ow0 * SW - p.PW;
#if MAX
  const float fill = uintBitsToFloat(0xff800000u);  // -inf: what a padded tap contributes
#else
  const float fill = 0.0;
#endif
  float acc[TM];
  for (int t = 0; t < TM; ++t) acc[t] = fill;
  [[unroll]] for (int ki = 0; ki < KH; ++ki) {
    const int ih = oh * p.SH - p.PH + ki * p.DH;
    const bool row_ok = ih >= 0 && ih < p.H;  // uniform across the workgroup's row
    if (!row_ok) continue;
    float span[SPAN];
    load_row_span(plane + ih * p.W, iw_first, p.W, true, fill, span);
    [[unroll]] for (int kj = 0; kj < KW; ++kj)
      [[unroll]] for (int t = 0; t < TM; ++t) {
#if MAX
        acc[t] = max(acc[t], span[t * SW + kj * DW]);
#else
        acc[t] += span[t * SW + kj * DW];
#endif
      }
  }
  const int channel = plane_index % p.C;
  const int out_row = (plane_index * p.OH + oh) * p.OW;
#if !MAX
  const int rows = window_count(oh * p.SH - p.PH, KH, p.H, p.PH_END);
#endif
  for (int t = 0; t < TM; ++t) {
    const int ow = ow0 + t;
    if (ow >= p.OW) break;
#if MAX
    const float v = acc[t];
#else
    const int count = max(rows * window_count(ow * SW - p.PW, KW, p.W, p.PW_END), 1);
    const float v = acc[t] / float(count);
#endif
    out_data[out_row + ow] = EPILOGUE(v, out_row + ow, channel);
  }
}
