// dce: dead code elimination. Other passes only redirect uses; this one deletes what is left over.
#include "core/passes/passes.h"

namespace kiln {

Pass dce_pass() {
  return {"dce", "remove nodes whose results nobody reads (graph inputs always stay)",
          [](Graph& graph) {
            return PassStats{{{"nodes_removed", int64_t(graph.remove_dead_nodes())}}};
          }};
}

}  // namespace kiln
