// f32 layer_norm over the trailing dims of x viewed as [rows, n], one launch: a team of lanes per
// row reduces the mean, then the mean of (x - mean)^2 (two passes over the row held in registers,
// which stays accurate when |mean| >> spread, as the cpu reference's two passes do), then writes
// (x - mean) * rsqrt(var + eps) * w + b. row_reduce.glsl and the variant's #defines are prepended
// by backends/vulkan/vulkan_norm_template.cpp.
//   VPT         values per lane kept in registers between the passes; a longer row reloads the rest
//   HAS_WEIGHT  multiply by w[col]      HAS_BIAS  add b[col] (only with a weight)

#if TEXEL
layout(binding = 0) uniform samplerBuffer x_tex;
float x_at(int i) { return texelFetch(x_tex, i).x; }
#else
layout(std430, binding = 0) readonly buffer BufX { float x_data[]; };
float x_at(int i) { return x_data[i]; }
#endif
#if HAS_WEIGHT && TEXEL
layout(binding = 1) uniform samplerBuffer w_tex;
float w_at(int i) { return texelFetch(w_tex, i).x; }
#elif HAS_WEIGHT
layout(std430, binding = 1) readonly buffer BufW { float w_data[]; };
float w_at(int i) { return w_data[i]; }
#endif
#if HAS_BIAS && TEXEL
layout(binding = 2) uniform samplerBuffer b_tex;
float b_at(int i) { return texelFetch(b_tex, i).x; }
#elif HAS_BIAS
layout(std430, binding = 2) readonly buffer BufB { float b_data[]; };
float b_at(int i) { return b_data[i]; }
#endif
layout(std430, binding = 1 + HAS_WEIGHT + HAS_BIAS) writeonly buffer BufOut { float out_data[]; };

layout(push_constant) uniform Params {
  int rows, n;
  int lanes;  // team size: a power of two <= WG
  float eps;
} p;

float affine(float v, int c) {
#if HAS_WEIGHT
  v *= w_at(c);
#endif
#if HAS_BIAS
  v += b_at(c);
#endif
  return v;
}

void main() {
  const int local = int(gl_LocalInvocationID.x);
  const int lane = local & (p.lanes - 1);
  const int row = red_group_index() * (WG / p.lanes) + local / p.lanes;
  const bool live = row < p.rows;
  const int base = live ? row * p.n : 0;
  const int n = live ? p.n : 0;  // rows past the end read nothing but still reduce

  float v[VPT];
  float s = 0.0;
  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    v[j] = c < n ? x_at(base + c) : 0.0;
    s += v[j];
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes) s += x_at(base + c);
  const float mean = red_team(RED_SUM, s, p.lanes) / float(p.n);

  float q = 0.0;
  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    const float d = c < n ? v[j] - mean : 0.0;
    q += d * d;
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes) {
    const float d = x_at(base + c) - mean;
    q += d * d;
  }
  const float var = red_team(RED_SUM, q, p.lanes) / float(p.n);
  const float rstd = inversesqrt(var + p.eps);

  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    if (c < n) out_data[base + c] = affine((v[j] - mean) * rstd, c);
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes)
    out_data[base + c] = affine((x_at(base + c) - mean) * rstd, c);
}
