// Graph passes and the pipeline that runs them in one named, ordered list. Each pass declares itself
// in one place (name, summary, run); KILN_DUMP_IR=dir writes the graph's text after every pass.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace kiln {

struct PassStats {
  std::map<std::string, int64_t> counters;  // "nodes_removed": 3, ...
};

struct Pass {
  std::string name;     // "cse", "dce", "fold-constants", "fuse-pointwise", ...
  std::string summary;  // one line, shown by dumps and the debugger
  std::function<PassStats(Graph&)> run;
};

struct PassRecord {
  std::string name;
  PassStats stats;
  std::string ir_after;  // text form, kept when PipelineOptions::keep_ir
  double seconds = 0;    // wall time of the pass itself (not the verifier or the dump)
};

struct PipelineOptions {
  // Writes 00-input.kir, then NN-name.kir after pass NN ("" = $KILN_DUMP_IR, or no dump when unset).
  std::string dump_dir;
  bool keep_ir = false;  // keep each pass's output text in the records (for bundles)
};

// run_pipeline runs passes in order, verifying the graph after each one; a pass that throws or leaves
// an invalid graph raises a kiln::Error naming it. Returns one record per pass. The standard list
// is core/runtime/standard_passes.h; the passes are in passes.h.
// options.dump_dir, else $KILN_DUMP_IR, else "" (no dump).
std::string dump_directory(const PipelineOptions& options);
std::vector<PassRecord> run_pipeline(Graph& graph, const std::vector<Pass>& passes,
                                     const PipelineOptions& options = {});

}  // namespace kiln
