// The conv2d template (shaders/conv2d.comp): which conv ops it takes, the variant defines and the
// push constants; eager ops and compiled programs reach it through the backend's template planner.
#pragma once

#include <optional>
#include <string>

#include "backends/backend.h"

namespace kiln::vulkan {

// The template's variants: the implicit GEMM with storage-buffer loads (Direct; Pointwise for 1x1
// stride-1 convs without padding), Depthwise, the implicit GEMM reading texels
// (shaders/conv2d_texel.comp), for channels per group that are a multiple of 4 and at most 5x5
// taps, and the implicit GEMM staging tiles through shared memory (Shared, GPUs).
enum class ConvVariant { Direct, Pointwise, Depthwise, Texel, Shared };

struct ConvTemplateOptions {
  // Texel or storage-buffer reads for the convs both variants take; unset: texels on software
  // devices (lavapipe), where they are the faster ones (BENCHMARKS.md), storage loads on GPUs.
  std::optional<bool> texel;
  // Shared-memory tiles for the implicit GEMM where texels are not read; unset: on GPUs (not
  // software devices, where shared memory is ordinary cache and only adds copies and barriers).
  std::optional<bool> shared;
};

struct ConvTile {
  int tm = 8, tn = 8;      // register tile: pixels x output channels
  int wg_x = 8, wg_y = 8;  // workgroup size (pixels, channels)
};

// The launch of the conv template for an f32 1-d/2-d conv (bias optional), or nothing when the op
// is not one it takes (other dtypes, 3-d, sizes past int32, too small to be worth a template).
std::optional<TemplateLaunch> conv_template_launch(const OpRun& run, const DeviceCaps& caps,
                                                   const ConvTemplateOptions& options = {});

// The template's source for one variant: #version and the defines, then shaders/conv2d.comp or
// shaders/conv2d_texel.comp.
std::string conv_source(const ConvTile& tile, int kh, int kw, ConvVariant variant, int sw, int dw,
                        bool has_bias);

// `next` with conv ops served by the conv template first.
TemplatePlanner with_conv_template(TemplatePlanner next, ConvTemplateOptions options = {});

}  // namespace kiln::vulkan
