// The row templates (shaders/softmax.comp, layernorm.comp, reduce.comp over row_reduce.glsl):
// softmax, log_softmax, layer_norm and sum/mean/max/min/prod over the innermost contiguous axis,
// one launch each with cooperative per-row reductions. Eager ops and compiled programs reach them
// through the backend's template planner.
#pragma once

#include <optional>
#include <string>

#include "backends/backend.h"

namespace kiln::vulkan {

struct NormTemplateOptions {
  bool subgroups = true;  // subgroup arithmetic where the device has it (false: shared-memory tree)
  int workgroup = 0;      // invocations per workgroup, a power of two; 0: the per-device default
};

// Which ops the row templates serve (before looking at dtypes and shapes).
bool is_norm_template_op(OpKind kind);

// The launch of a row template for an f32 op whose reduced elements are the innermost, contiguous
// ones, or nothing (other dtypes, other axes, empty tensors, sizes past int32): the generic
// lowering runs then.
std::optional<TemplateLaunch> norm_template_launch(const OpRun& run, const DeviceCaps& caps,
                                                   const NormTemplateOptions& options = {});

// `next` with softmax, layer_norm and the reductions served by the row templates first.
TemplatePlanner with_norm_template(TemplatePlanner next, NormTemplateOptions options = {});

}  // namespace kiln::vulkan
