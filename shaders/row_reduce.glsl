// Cooperative row reductions shared by softmax.comp, layernorm.comp and reduce.comp; prepended to
// them (after the variant's #defines) by backends/vulkan/vulkan_norm_template.cpp.
//   WG        workgroup size, a power of two
//   SUBGROUP  reduce with subgroup arithmetic; only set when one team spans the whole workgroup
//   TEXEL     read the inputs through uniform texel buffers (lavapipe gathers a texelFetch's lanes
//             at once, where a storage-buffer load is a loop over them)
// A workgroup holds WG / lanes rows; a row's team is an aligned block of `lanes` (a power of two)
// consecutive invocations, lane = local index % lanes. Every invocation, including those of rows
// past the end, takes part in every reduction, so the barriers stay in uniform control flow.
#extension GL_EXT_control_flow_attributes : enable
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

#define RED_SUM 0
#define RED_MAX 1
#define RED_MIN 2
#define RED_PROD 3

#define kInf uintBitsToFloat(0x7f800000u)
#define kNaN uintBitsToFloat(0x7fc00000u)

// max/min with NaN winning, as the cpu reference and the generic kernels (kiln_max) do; GLSL's
// max() leaves a NaN operand undefined.
float red_combine(int op, float a, float b) {
  if (op == RED_SUM) return a + b;
  if (op == RED_PROD) return a * b;
  if (isnan(a) || isnan(b)) return a + b;
  return op == RED_MAX ? max(a, b) : min(a, b);
}

float red_identity(int op) {
  return op == RED_SUM ? 0.0 : op == RED_PROD ? 1.0 : op == RED_MAX ? -kInf : kInf;
}

shared float red_shared[WG];

// Workgroups beyond 65535 spill into y.
int red_group_index() { return int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x); }

#if SUBGROUP
float red_subgroup(int op, float v) {
  if (op == RED_SUM) return subgroupAdd(v);
  if (op == RED_PROD) return subgroupMul(v);
  // Subgroup max/min leave NaN undefined too: a NaN anywhere in the subgroup decides.
  const bool any_nan = subgroupMax(isnan(v) ? 1u : 0u) != 0u;
  const float r = op == RED_MAX ? subgroupMax(v) : subgroupMin(v);
  return any_nan ? kNaN : r;
}
#endif

// Combines `v` over the calling invocation's team; every member gets the result.
float red_team(int op, float v, int lanes) {
  const uint local = gl_LocalInvocationID.x;
  barrier();  // the previous reduction's readers are done with red_shared
#if SUBGROUP
  // One team per workgroup: subgroup partials, then every invocation folds them in order.
  const float part = red_subgroup(op, v);
  if (subgroupElect()) red_shared[gl_SubgroupID] = part;
  barrier();
  float r = red_shared[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) r = red_combine(op, r, red_shared[i]);
  return r;
#else
  red_shared[local] = v;
  barrier();
  const uint lane = local & uint(lanes - 1);
  for (uint s = uint(lanes) >> 1; s > 0; s >>= 1) {
    if (lane < s) red_shared[local] = red_combine(op, red_shared[local], red_shared[local + s]);
    barrier();
  }
  return red_shared[local - lane];
#endif
}
