// Accuracy bisection: per-node and per-kernel device vs reference (ref) comparisons, fed the
// reference's inputs.
#include "core/runtime/accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

#include "core/runtime/execute_op.h"
#include "core/runtime/symbol_bindings.h"
#include "core/support/error.h"

namespace kiln {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The worst element over a set of outputs, and whether every element is within tolerance.
struct Comparison {
  double max_abs = 0, max_rel = 0;
  bool within = true;
  double tolerance = 0;  // at the worst element
  std::string worst;
  int worst_output = -1;
};

// Compares device outputs with the reference's, output by output; `names` label them in `worst`.
Comparison compare_outputs(const std::vector<DeviceTensor>& got, const std::vector<DeviceTensor>& want,
                           const std::vector<std::string>& names, double rtol, double atol) {
  Comparison c;
  double worst_excess = -1;
  for (size_t o = 0; o < want.size(); ++o) {
    if (got[o].sizes() != want[o].sizes()) {
      c.within = false;
      c.max_abs = c.max_rel = INFINITY;
      c.worst = names[o] + " has shape " + got[o].type.str() + ", the reference " + want[o].type.str();
      c.worst_output = int(o);
      return c;
    }
    std::vector<double> g = got[o].to_host<double>(), w = want[o].to_host<double>();
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::isnan(g[i]) && std::isnan(w[i])) continue;
      if (g[i] == w[i]) continue;  // equal infinities too
      double err = std::fabs(g[i] - w[i]);
      if (std::isnan(err)) err = INFINITY;  // NaN on one side only
      double rel = w[i] != 0 ? err / std::fabs(w[i]) : (err > 0 ? INFINITY : 0);
      c.max_abs = std::max(c.max_abs, err);
      c.max_rel = std::max(c.max_rel, rel);
      double allowed = atol + rtol * std::fabs(w[i]);
      double excess = err - allowed;
      if (excess > 0) c.within = false;
      if (excess > worst_excess || std::isnan(excess)) {
        worst_excess = excess;
        c.tolerance = allowed;
        c.worst_output = int(o);
        c.worst = names[o] + " element " + std::to_string(i) + ": got " + number(g[i]) + ", want " +
                  number(w[i]);
      }
    }
  }
  return c;
}

void compare(const std::vector<DeviceTensor>& got, const std::vector<DeviceTensor>& want, double rtol,
             double atol, NodeAccuracy& row) {
  std::vector<std::string> names;
  for (size_t o = 0; o < want.size(); ++o) names.push_back("output " + std::to_string(o));
  Comparison c = compare_outputs(got, want, names, rtol, atol);
  row.max_abs_error = c.max_abs;
  row.max_rel_error = c.max_rel;
  row.within_tolerance = c.within;
  row.worst = c.worst;
}

}  // namespace

std::string AccuracyReport::str() const {
  std::ostringstream s;
  s << "accuracy on " << device << " vs ref (rtol " << number(rtol) << ", atol " << number(atol)
    << ")\n";
  for (const NodeAccuracy& n : nodes) {
    char line[160];
    std::snprintf(line, sizeof line, "  %s %%%-4d %-16s max abs %-11s max rel %-11s ",
                  n.within_tolerance ? "ok  " : "FAIL", n.node_id, n.op.c_str(),
                  number(n.max_abs_error).c_str(), number(n.max_rel_error).c_str());
    s << line << n.provenance.str() << "\n";
  }
  if (const NodeAccuracy* bad = first_bad_node())
    s << "first node past tolerance: %" << bad->node_id << " " << bad->op << " at "
      << bad->provenance.str() << " (" << bad->worst << ")\n";
  else
    s << "every node within tolerance\n";
  return s.str();
}

AccuracyReport check_accuracy(const Graph& graph, const std::vector<DeviceTensor>& inputs, Device device,
                              double rtol, double atol, const AccuracyTap& tap) {
  if (inputs.size() != graph.inputs().size())
    throw Error("check_accuracy: the graph has " + std::to_string(graph.inputs().size()) +
                " inputs, " + std::to_string(inputs.size()) + " were given");
  AccuracyReport report;
  report.device = device.name();
  report.rtol = rtol;
  report.atol = atol;
  std::unordered_map<const Value*, DeviceTensor> reference;  // every value, computed on cpu
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = graph.inputs()[i];
    if (inputs[i].type.dtype != v->type.dtype || inputs[i].type.rank() != v->type.rank())
      throw Error("check_accuracy: input " + std::to_string(i) + " ('" + v->name +
                  "') should be " + v->type.str() + ", got " + inputs[i].type.str());
    reference[v] = inputs[i].copy_to(Device::ref());
  }
  const SymbolBindings bindings = bind_graph_inputs(graph, types_of(inputs));
  for (const Node* node : graph.nodes()) {
    std::vector<DeviceTensor> cpu_args, dev_args;
    for (const Value* v : node->inputs) {
      cpu_args.push_back(reference.at(v));
      dev_args.push_back(cpu_args.back().copy_to(device));
    }
    AttrMap attrs = concrete_attrs(node->attrs, bindings);
    std::vector<DeviceTensor> want = execute_op(node->kind, cpu_args, attrs, node->provenance);
    if (cpu_args.empty())  // a constant is made on the default device
      for (DeviceTensor& t : want) t = t.copy_to(Device::ref());
    // Ops without inputs (constants) make their value on the host; only computed ones are compared.
    std::vector<DeviceTensor> got =
        dev_args.empty() ? want : execute_op(node->kind, dev_args, attrs, node->provenance);
    if (tap) tap(*node, got);
    NodeAccuracy row;
    row.node_id = node->id;
    row.op = std::string(op_name(node->kind));
    row.provenance = node->provenance;
    compare(got, want, rtol, atol, row);
    if (!row.within_tolerance && report.first_bad < 0) report.first_bad = int(report.nodes.size());
    report.nodes.push_back(std::move(row));
    for (size_t i = 0; i < want.size(); ++i) reference[node->outputs[i]] = std::move(want[i]);
  }
  return report;
}


namespace {

// Generated lines of kernel `k` that compute node `node` (every launch), trimmed, at most 8.
std::vector<std::string> lines_of(const PlannedProgram& program, int k, int node) {
  std::vector<std::string> out;
  std::vector<PlannedLaunch> launches = program.launches();
  int index = 0;
  for (const PlannedLaunch& l : launches) {
    if (l.kernel != k) continue;
    std::string where = "launch " + std::to_string(index++);
    if (l.is_template) {
      out.push_back(where + ": the backend's template '" + l.name + "' (hand-written, no per-line origins)");
      continue;
    }
    std::istringstream in(l.source);
    size_t i = 0;
    for (std::string line; std::getline(in, line); ++i) {
      if (i >= l.line_origins.size() || out.size() >= 8) break;
      const std::vector<int>& o = l.line_origins[i];
      if (std::find(o.begin(), o.end(), node) == o.end()) continue;
      size_t text = line.find_first_not_of(" \t");
      out.push_back(where + " line " + std::to_string(i + 1) + ": " + (text == std::string::npos ? "" : line.substr(text)));
    }
  }
  return out;
}

}  // namespace

std::string KernelAccuracyReport::str() const {
  std::ostringstream s;
  s << "accuracy per compiled kernel on " << device << " vs ref (rtol " << number(rtol) << ", atol "
    << number(atol) << ")\n";
  for (const KernelAccuracy& k : kernels) {
    char line[200];
    std::snprintf(line, sizeof line, "  %s %3d %-28s max abs %-11s max rel %-11s nodes", k.within_tolerance ? "ok  " : "FAIL",
                  k.kernel, k.name.c_str(), number(k.max_abs_error).c_str(), number(k.max_rel_error).c_str());
    s << line;
    for (int id : k.origins) s << " %" << id;
    s << "\n";
  }
  if (const KernelAccuracy* bad = first_bad_kernel()) {
    s << "first kernel past tolerance: " << bad->kernel << " '" << bad->name << "' (" << bad->worst << ")\n";
    if (bad->worst_node >= 0) s << "  the value is node %" << bad->worst_node << " at " << bad->provenance.str() << "\n";
    for (const std::string& l : bad->source_lines) s << "    " << l << "\n";
  } else {
    s << "every kernel within tolerance\n";
  }
  return s.str();
}

KernelAccuracyReport check_kernel_accuracy(const Graph& graph, const std::vector<DeviceTensor>& inputs,
                                           Device device, double rtol, double atol,
                                           const KernelAccuracyTap& tap) {
  if (!device.backend().codegen())
    throw Error("check_kernel_accuracy: " + device.name() +
                " runs graphs node by node (the interpreter), not compiled kernels; use check_accuracy "
                "for its per-node rows");
  PlannedProgram program(graph, device);
  return check_kernel_accuracy(program, graph, inputs, rtol, atol, tap);
}

KernelAccuracyReport check_kernel_accuracy(PlannedProgram& program, const Graph& graph,
                                           const std::vector<DeviceTensor>& inputs, double rtol, double atol,
                                           const KernelAccuracyTap& tap) {
  if (inputs.size() != graph.inputs().size())
    throw Error("check_kernel_accuracy: the graph has " + std::to_string(graph.inputs().size()) +
                " inputs, " + std::to_string(inputs.size()) + " were given");
  KernelAccuracyReport report;
  report.device = program.device().name();
  report.rtol = rtol;
  report.atol = atol;
  // Every value on the reference (ref), by value id.
  std::map<int, DeviceTensor> reference;
  std::vector<DeviceTensor> device_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    reference[graph.inputs()[i]->id] = inputs[i].copy_to(Device::ref());
    device_inputs.push_back(inputs[i].copy_to(program.device()));
  }
  const SymbolBindings bindings = bind_graph_inputs(graph, types_of(inputs));
  for (const Node* node : graph.nodes()) {
    std::vector<DeviceTensor> args;
    for (const Value* v : node->inputs) args.push_back(reference.at(v->id));
    std::vector<DeviceTensor> outs =
        execute_op(node->kind, args, concrete_attrs(node->attrs, bindings), node->provenance);
    for (size_t i = 0; i < outs.size(); ++i) reference[node->outputs[i]->id] = outs[i].copy_to(Device::ref());
  }
  program.run(device_inputs);  // fixes the shapes run_kernel launches at
  const std::vector<PlannedKernel>& kernels = program.kernels();
  for (size_t k = 0; k < kernels.size(); ++k) {
    const PlannedKernel& pk = kernels[k];
    std::map<int, DeviceTensor> ins;
    for (int id : pk.reads) ins[id] = reference.at(id);
    std::map<int, DeviceTensor> outs = program.run_kernel(k, ins);
    if (tap) tap(k, pk, outs);
    std::vector<DeviceTensor> got, want;
    std::vector<std::string> names;
    std::vector<int> ids;
    for (const auto& [id, t] : outs) {
      got.push_back(t);
      want.push_back(reference.at(id));
      names.push_back("%" + std::to_string(id) + " " + want.back().type.str());
      ids.push_back(id);
    }
    Comparison c = compare_outputs(got, want, names, rtol, atol);
    KernelAccuracy row;
    row.kernel = int(k);
    row.name = pk.name;
    row.origins = pk.origins;
    row.max_abs_error = c.max_abs;
    row.max_rel_error = c.max_rel;
    row.within_tolerance = c.within;
    row.tolerance = c.tolerance;
    row.worst = c.worst;
    if (c.worst_output >= 0) {
      int value = ids[size_t(c.worst_output)];
      for (const PlannedNode& n : pk.nodes)
        if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end()) {
          row.worst_node = n.id;
          row.provenance = n.provenance;
        }
      if (row.worst_node >= 0) row.source_lines = lines_of(program, int(k), row.worst_node);
    }
    if (!row.within_tolerance && report.first_bad < 0) report.first_bad = int(report.kernels.size());
    report.kernels.push_back(std::move(row));
  }
  return report;
}

}  // namespace kiln
