// The pass runner: verifies and dumps the graph after every pass. The standard list of passes is
// core/runtime/standard_passes.cpp.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/passes/pass.h"
#include "core/passes/passes.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {

namespace {

std::string stats_str(const PassStats& stats) {
  std::string s;
  for (const auto& [name, value] : stats.counters)
    s += (s.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return s.empty() ? "(no statistics)" : s;
}

void write_dump(const std::filesystem::path& file, const std::string& header, const std::string& ir) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << header << ir;
  if (!out) throw Error("pass pipeline: cannot write IR dump " + file.string());
}

std::string numbered(size_t index, const std::string& name) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02zu-", index);
  return prefix + name + ".kir";
}

}  // namespace

std::string dump_directory(const PipelineOptions& options) {
  if (!options.dump_dir.empty()) return options.dump_dir;
  const char* env = std::getenv("KILN_DUMP_IR");
  return env ? env : "";
}

std::vector<PassRecord> run_pipeline(Graph& graph, const std::vector<Pass>& passes,
                                     const PipelineOptions& options) {
  namespace fs = std::filesystem;
  const std::string dir = dump_directory(options);
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("pass pipeline: cannot create IR dump directory '" + dir + "': " + ec.message());
    // 00-input.kir: what the first pass saw, so every pass's dump has a "before" to diff against.
    write_dump(fs::path(dir) / numbered(0, "input"), "// kiln IR before the pass pipeline\n",
               print_graph(graph));
  }

  std::vector<PassRecord> records;
  for (size_t i = 0; i < passes.size(); ++i) {
    const Pass& pass = passes[i];
    const std::string which = "pass " + std::to_string(i + 1) + "/" + std::to_string(passes.size()) +
                              " '" + pass.name + "'";
    PassRecord record;
    record.name = pass.name;
    auto start = std::chrono::steady_clock::now();
    try {
      record.stats = pass.run(graph);
    } catch (const Error& e) {
      throw Error(which + " failed: " + e.what());
    }
    record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    try {
      verify_graph_or_throw(graph);
    } catch (const Error& e) {
      throw Error(which + " left an invalid graph: " + e.what());
    }
    log::debug(which + ": " + stats_str(record.stats) + ", " + std::to_string(graph.num_nodes()) +
               " nodes");
    if (options.keep_ir || !dir.empty()) {
      std::string ir = print_graph(graph);
      if (!dir.empty())
        write_dump(fs::path(dir) / numbered(i + 1, pass.name),
                   "// kiln IR after " + which + " (" + pass.summary + "): " +
                       stats_str(record.stats) + "\n",
                   ir);
      if (options.keep_ir) record.ir_after = std::move(ir);
    }
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace kiln
