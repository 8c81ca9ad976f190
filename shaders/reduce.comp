// f32 sum / mean / max / min / prod over the innermost axis of x viewed as [rows, n], one launch: a
// team of lanes per row accumulates a strided slice each, then combines cooperatively
// (row_reduce.glsl, prepended with the variant's #defines by
// backends/vulkan/vulkan_norm_template.cpp).
//   OP    RED_SUM, RED_MAX, RED_MIN or RED_PROD
//   MEAN  divide the sum by n

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

  float acc = red_identity(OP);
  for (int c = lane; c < n; c += p.lanes) acc = red_combine(OP, acc, x_at(base + c));
  acc = red_team(OP, acc, p.lanes);
#if MEAN
  acc /= float(p.n);
#endif
  if (live && lane == 0) out_data[row] = acc;
}
