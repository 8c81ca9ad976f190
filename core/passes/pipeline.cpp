// The standard pass pipeline (to be filled in) and the runner.
#include "core/passes/pass.h"

namespace kiln {

std::vector<Pass> standard_pipeline() { return {}; }

std::vector<PassRecord> run_pipeline(Graph&, const std::vector<Pass>&, const PipelineOptions&) {
  return {};
}

}  // namespace kiln
