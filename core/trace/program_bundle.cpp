// make_program_bundle: a Bundle recording what a PlannedProgram actually runs.
#include "core/trace/program_bundle.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/ir/text.h"
#include "core/kernel/emit.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln::trace {
namespace {

int64_t bytes_of(const TensorType& t) { return numel(t.shape).hint() * int64_t(dtype_size(t.dtype)); }

// A template's source names no origins; every statement after its entry computes the kernel's node.
std::vector<std::vector<int>> template_origins(const std::string& source, const std::vector<int>& nodes) {
  std::vector<std::vector<int>> out;
  std::istringstream in(source);
  bool body = false;
  for (std::string line; std::getline(in, line);) {
    size_t text = line.find_first_not_of(" \t");
    bool statement = body && text != std::string::npos && line[text] != '}' && line[text] != '{' &&
                     line.compare(text, 2, "//") != 0;
    out.push_back(statement ? nodes : std::vector<int>{});
    body = body || line.find("void main()") != std::string::npos;
  }
  return out;
}

}  // namespace

Bundle make_program_bundle(const Graph& graph, const PlannedProgram& program,
                           const std::vector<LaunchTiming>& timings, const ProgramBundleOptions& options) {
  Bundle bundle;
  bundle.kind = "program";
  bundle.name = options.name;
  bundle.device = program.device().name();
  record_graph(bundle, graph);
  bundle.passes.push_back({"input", print_graph(graph, options.name), 0, {}});

  std::map<int, const Value*> values;
  for (const Value* v : graph.inputs()) values[v->id] = v;
  std::map<int, const Node*> nodes;
  for (const Node* n : graph.nodes()) {
    nodes[n->id] = n;
    for (const Value* v : n->outputs) values[v->id] = v;
  }
  std::vector<PlannedLaunch> launches = program.launches();
  std::map<int, const LaunchTiming*> timing_of;  // by launch index
  for (const LaunchTiming& t : timings) timing_of[t.launch] = &t;

  const std::vector<PlannedKernel>& kernels = program.kernels();
  for (size_t k = 0; k < kernels.size(); ++k) {
    const PlannedKernel& pk = kernels[k];
    BundleKernel bk;
    bk.name = pk.name;
    std::vector<Provenance> provenance;
    for (const PlannedNode& n : pk.nodes) {
      bk.origins.push_back(n.id);
      auto it = nodes.find(n.id);
      if (it == nodes.end()) continue;
      bk.flops += estimate_flops(*it->second);
      provenance.push_back(it->second->provenance);
    }
    bk.phase = kernel_phase(provenance);
    for (int id : pk.reads)
      if (values.count(id)) bk.bytes_read += bytes_of(values[id]->type);
    for (int id : pk.writes)
      if (values.count(id)) bk.bytes_written += bytes_of(values[id]->type);
    for (size_t l = 0; l < launches.size(); ++l) {
      const PlannedLaunch& pl = launches[l];
      if (pl.kernel != int(k)) continue;
      KernelSource src;
      src.dialect = pl.language;  // "glsl", "cuda", "cpp", or "host" (the cpu backend's host ops)
      src.entry = src.dialect == "glsl" ? "main" : kernel::cuda_entry_name();
      src.text = pl.source;
      src.line_origins = pl.is_template ? template_origins(pl.source, bk.origins) : pl.line_origins;
      src.groups = pl.groups;
      src.workgroup_size = pl.workgroup_size;
      src.program = pl.name;
      src.is_template = pl.is_template;
      if (options.disassemble) {
        try {
          src.spirv = program.device().backend().disassemble({pl.name, pl.language, pl.source});
        } catch (const Error& e) {
          log::warn("make_program_bundle: no disassembly of '" + pl.name + "': " + e.what());
        }
      }
      if (auto t = timing_of.find(int(l)); t != timing_of.end()) {
        src.time_us = t->second->time_us;
        bk.time_us = bk.time_us.value_or(0) + t->second->time_us;
        if (!bk.start_us) bk.start_us = t->second->start_us;
      }
      bk.sources.push_back(std::move(src));
    }
    bundle.kernels.push_back(std::move(bk));
  }

  // Nodes no kernel computes: constants, and nodes whose kernel had nothing to launch.
  std::set<int> constants(program.constant_nodes().begin(), program.constant_nodes().end());
  for (BundleNode& bn : bundle.nodes) {
    if (constants.count(bn.id)) {
      bn.no_kernel = "constant: uploaded once, computed by no kernel";
      continue;
    }
    int k = bundle.kernel_of(bn.id);
    if (k < 0) bn.no_kernel = "computed by no kernel of the compiled program";
    else if (bundle.kernels[size_t(k)].sources.empty()) bn.no_kernel = "empty: no elements to compute";
  }

  const MemoryPlan& plan = program.memory_plan();
  const std::vector<PlanValue>& planned = program.plan_values();
  const std::vector<int>& ids = program.plan_value_ids();
  for (size_t i = 0; i < planned.size() && i < plan.placements.size(); ++i) {
    const Placement& p = plan.placements[i];
    bundle.memory.buffers.push_back({i < ids.size() ? ids[i] : -1, planned[i].name, int64_t(planned[i].bytes),
                                     p.arena, int64_t(p.offset), planned[i].first, planned[i].last, p.in_place});
  }
  for (size_t a : plan.arena_bytes) bundle.memory.arena_bytes.push_back(int64_t(a));
  bundle.memory.naive_bytes = plan.naive_bytes;
  bundle.memory.lower_bound_bytes = plan.lower_bound_bytes;
  bundle.memory.planned_bytes = plan.planned_bytes;
  return bundle;
}

void record_accuracy(Bundle& bundle, const KernelAccuracyReport& report) {
  bundle.accuracy.clear();
  for (const KernelAccuracy& k : report.kernels)
    bundle.accuracy.push_back({k.kernel, k.max_abs_error, k.max_rel_error, k.tolerance, k.within_tolerance,
                               k.name, k.worst, k.worst_node, k.source_lines});
}

}  // namespace kiln::trace
