// Fills the first `count` 32-bit words of a buffer with `value` (any dtype's bit pattern).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { uint words[]; };
layout(push_constant) uniform Params { uint value; uint count; };

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < count) words[i] = value;
}
