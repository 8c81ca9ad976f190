// f32 softmax / log_softmax over the last axis of x viewed as [rows, n], one launch: a team of
// lanes per row finds the max, then the sum of exp(x - max), cooperatively (row_reduce.glsl, which
// is prepended along with the variant's #defines by backends/vulkan/vulkan_norm_template.cpp).
//   VPT   values per lane kept in registers between the passes; a longer row reloads the rest
//   LOG   log_softmax: (x - max) - log(sum), else exp(x - max) / sum
// A NaN anywhere makes the row NaN and an all -inf row gives NaN, as in the cpu reference.

#if TEXEL
layout(binding = 0) uniform samplerBuffer x_tex;
float x_at(int i) { return texelFetch(x_tex, i).x; }
#else
layout(std430, binding = 0) readonly buffer BufX { float x_data[]; };
float x_at(int i) { return x_data[i]; }
#endif
layout(std430, binding = 1) writeonly buffer BufOut { float out_data[]; };

layout(push_constant) uniform Params {
  int rows, n;
  int lanes;  // team size: a power of two <= WG
} p;

void main() {
  const int local = int(gl_LocalInvocationID.x);
  const int lane = local & (p.lanes - 1);
  const int row = red_group_index() * (WG / p.lanes) + local / p.lanes;
  const bool live = row < p.rows;
  const int base = live ? row * p.n : 0;
  const int n = live ? p.n : 0;  // rows past the end read nothing but still reduce

  float v[VPT];
  float m = -kInf;
  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    v[j] = c < n ? x_at(base + c) : -kInf;
    m = red_combine(RED_MAX, m, v[j]);
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes) m = red_combine(RED_MAX, m, x_at(base + c));
  m = red_team(RED_MAX, m, p.lanes);

  float s = 0.0;
  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    const float e = c < n ? exp(v[j] - m) : 0.0;
#if !LOG
    v[j] = e;
#endif
    s += e;
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes) s += exp(x_at(base + c) - m);
  s = red_team(RED_SUM, s, p.lanes);

#if LOG
  const float log_s = log(s);
  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    if (c < n) out_data[base + c] = (v[j] - m) - log_s;
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes) out_data[base + c] = (x_at(base + c) - m) - log_s;
#else
  [[unroll]] for (int j = 0; j < VPT; ++j) {
    const int c = lane + j * p.lanes;
    if (c < n) out_data[base + c] = v[j] / s;
  }
  for (int c = lane + VPT * p.lanes; c < n; c += p.lanes) out_data[base + c] = exp(x_at(base + c) - m) / s;
#endif
}
