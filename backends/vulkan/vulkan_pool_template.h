// The pooling template (shaders/pool2d.comp): which max and average pools it takes, the variant
// defines and the push constants; eager ops and compiled programs reach it through the backend's
// template planner.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/backend.h"

namespace kiln::vulkan {

// Mirrors the push constants of shaders/pool2d.comp.
struct PoolParams {
  int32_t c, h, w;
  int32_t oh, ow;
  int32_t sh, dh;
  int32_t ph, pw;
  int32_t ph_end, pw_end;
};

struct PoolTemplateOptions {
  // Texel or storage-buffer reads; unset: texels on software devices (lavapipe), storage loads on
  // GPUs. Texels need the input's element count to be a multiple of 4.
  std::optional<bool> texel;
};

// The launch of the pooling template for an f32 1-d/2-d max_pool or avg_pool in channels-first
// layout, or nothing for other dtypes, ranks, layouts and sizes past int32.
std::optional<TemplateLaunch> pool_template_launch(const OpRun& run, const DeviceCaps& caps,
                                                   const PoolTemplateOptions& options = {});

// `next` with max and average pools served by the pooling template first.
TemplatePlanner with_pool_template(TemplatePlanner next, PoolTemplateOptions options = {});

}  // namespace kiln::vulkan
