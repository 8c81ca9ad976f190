// Epilogues for the GLSL templates (matmul, conv): a fused run's pointwise chain, printed by the
// kernel emitter's own op expressions, runs at the template's store (Backend::plan_fused_template).
#pragma once

#include <functional>
#include <optional>
#include <span>

#include "backends/backend.h"

namespace kiln::templates {

// Plans the anchor op of `fused` with `plan`, then gives that template the epilogue: the text
// declares one storage buffer per operand after the template's own bindings and defines
// EPILOGUE(v, index, channel), which the template applies where it stores (its `// KILN_EPILOGUE`
// line). An operand may be a scalar, run along the result's channels (conv's dim 1, matmul's last
// dim) or have the result's shape. Nothing when the template has no such line, an operand is none
// of those, a value is not f32, or a step has no expression form.
std::optional<TemplateLaunch> plan_glsl_epilogue(const OpRun& fused, std::span<const EpilogueStep> epilogue,
                                                 const std::function<std::optional<TemplateLaunch>(const OpRun&)>& plan);

}  // namespace kiln::templates
