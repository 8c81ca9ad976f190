// Decoding of a conv op (1-d or 2-d, NCHW or channels-last, groups, stride, padding, dilation, optional bias) into the
// parameter block the conv templates of every backend take (shaders/conv2d.comp, shaders/cuda/conv2d_f32.cu).
#pragma once

#include <cstdint>
#include <optional>

#include "backends/backend.h"

namespace kiln {

// Mirrors the conv templates' parameter blocks (GLSL push constants in scalar layout, the CUDA struct).
struct ConvParams {
  int32_t c, h, w;     // input channels (all groups) and spatial size
  int32_t o, oh, ow;   // output channels (all groups) and spatial size
  int32_t cg, og;      // channels per group, in and out
  int32_t groups;
  int32_t sh, sw, ph, pw, dh, dw;  // stride, leading padding, dilation (1-d: h, oh, kh = 1)
};

struct ConvProblem {
  ConvParams params{};
  int64_t batch = 0;
  int kh = 1, kw = 1;
  bool has_bias = false;
  bool channels_last = false;  // activations [N, *spatial, C]: only the cpu backend's oneDNN conv takes them
};

// The problem of an f32 conv whose sizes fit int32 and that writes at least one element; nothing for
// other dtypes, ranks, inconsistent channel counts, or an empty output (the generic path skips it).
std::optional<ConvProblem> decode_conv(const OpRun& run);

}  // namespace kiln
