// Epilogues for the GLSL and CUDA templates (matmul, conv): a fused run's pointwise chain, printed
// by the kernel emitter's own op expressions, runs at the template's store
// (Backend::plan_fused_template).
#pragma once

#include <functional>
#include <optional>
#include <span>

#include "backends/backend.h"

namespace kiln::templates {

// Plans the anchor op of `fused` with `plan`, then gives that template the epilogue: the text
// after the template's `// KILN_EPILOGUE` line defines EPILOGUE(v, index, channel), which the
// template applies where it stores, and takes each operand as a storage buffer after the
// template's own bindings (GLSL) or a kernel parameter after its output (CUDA,
// KILN_EPILOGUE_PARAMS). An operand may be a scalar, run along the result's channels (conv's dim 1, matmul's last
// dim) or have the result's shape. Nothing when the template has no such line, an operand is none
// of those, a value is not f32, or a step has no expression form or another result type (a
// comparison, a cast).
std::optional<TemplateLaunch> plan_template_epilogue(const OpRun& fused, std::span<const EpilogueStep> epilogue,
                                                     const std::function<std::optional<TemplateLaunch>(const OpRun&)>& plan);

}  // namespace kiln::templates
