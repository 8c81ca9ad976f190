// The standard graph pass pipeline, as one readable list, and every pass kiln knows by name. It
// lives above the passes because fold-constants evaluates with the reference kernels (execute_op
// on ref), which the passes themselves do not reach.
#pragma once

#include <string_view>
#include <vector>

#include "core/passes/pass.h"

namespace kiln {

// The passes compile_graph runs first, in order.
std::vector<Pass> standard_pipeline();
// Every pass kiln knows, for lookup by name (tests, tools, KILN_PASSES-style overrides).
std::vector<Pass> registered_passes();
// The pass with this name; throws kiln::Error listing the known names.
Pass find_pass(std::string_view name);
// "fold-constants,cse,dce" -> those passes in that order.
std::vector<Pass> parse_pass_list(std::string_view names);

}  // namespace kiln
