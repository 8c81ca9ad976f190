// Copies `count` 32-bit words from src[src_offset...] to dst[dst_offset...].
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Params { uint count; uint src_offset; uint dst_offset; };

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < count) dst[dst_offset + i] = src[src_offset + i];
}
