// Accuracy bisection: per-node device vs cpu reference comparison with the reference's inputs.
#include "core/runtime/accuracy.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

#include "core/frontend/dispatch.h"

namespace kiln {
namespace {

// Symbols bound from the inputs' sizes, as interpret() does, so symbolic graphs check too.
std::map<std::string, int64_t> bind_symbols(const Graph& graph, const std::vector<Tensor>& inputs) {
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& declared = graph.inputs()[i]->type.shape;
    std::vector<int64_t> actual = inputs[i].sizes();
    for (size_t d = 0; d < declared.size() && d < actual.size(); ++d)
      if (!declared[d].is_static() && declared[d].str().find_first_of("+-*/%(") == std::string::npos)
        bindings.emplace(declared[d].str(), actual[d]);
  }
  return bindings;
}

AttrMap concrete_attrs(const AttrMap& attrs, const std::map<std::string, int64_t>& bindings) {
  AttrMap out = attrs;
  for (const auto& [name, value] : attrs)
    if (const auto* syms = std::get_if<std::vector<SymInt>>(&value)) {
      std::vector<SymInt> fixed;
      for (const SymInt& s : *syms) fixed.push_back(s.is_static() ? s : SymInt(s.evaluate(bindings)));
      out.set(name, fixed);
    }
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Compares one node's device outputs with the reference's; fills the error fields of `row`.
void compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double rtol,
             double atol, NodeAccuracy& row) {
  double worst_excess = -1;
  for (size_t o = 0; o < want.size(); ++o) {
    if (got[o].sizes() != want[o].sizes()) {
      row.within_tolerance = false;
      row.max_abs_error = row.max_rel_error = INFINITY;
      row.worst = "output " + std::to_string(o) + " has shape " + got[o].type().str() +
                  ", the reference " + want[o].type().str();
      return;
    }
    std::vector<double> g = got[o].to_vector<double>(), w = want[o].to_vector<double>();
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::isnan(g[i]) && std::isnan(w[i])) continue;
      if (g[i] == w[i]) continue;  // equal infinities too
      double err = std::fabs(g[i] - w[i]);
      if (std::isnan(err)) err = INFINITY;  // NaN on one side only
      double rel = w[i] != 0 ? err / std::fabs(w[i]) : (err > 0 ? INFINITY : 0);
      row.max_abs_error = std::max(row.max_abs_error, err);
      row.max_rel_error = std::max(row.max_rel_error, rel);
      double excess = err - (atol + rtol * std::fabs(w[i]));
      if (excess > 0) row.within_tolerance = false;
      if (excess > worst_excess || std::isnan(excess)) {
        worst_excess = excess;
        row.worst = "output " + std::to_string(o) + " element " + std::to_string(i) + ": got " +
                    number(g[i]) + ", want " + number(w[i]);
      }
    }
  }
}

}  // namespace

std::string AccuracyReport::str() const {
  std::ostringstream s;
  s << "accuracy on " << device << " vs cpu (rtol " << number(rtol) << ", atol " << number(atol)
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

AccuracyReport check_accuracy(const Graph& graph, const std::vector<Tensor>& inputs, Device device,
                              double rtol, double atol, const AccuracyTap& tap) {
  if (inputs.size() != graph.inputs().size())
    throw Error("check_accuracy: the graph has " + std::to_string(graph.inputs().size()) +
                " inputs, " + std::to_string(inputs.size()) + " were given");
  AccuracyReport report;
  report.device = device.name();
  report.rtol = rtol;
  report.atol = atol;
  std::unordered_map<const Value*, Tensor> reference;  // every value, computed on cpu
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = graph.inputs()[i];
    if (inputs[i].dtype() != v->type.dtype || inputs[i].dim() != int64_t(v->type.rank()))
      throw Error("check_accuracy: input " + std::to_string(i) + " ('" + v->name +
                  "') should be " + v->type.str() + ", got " + inputs[i].type().str());
    reference[v] = inputs[i].to(Device::cpu());
  }
  const std::map<std::string, int64_t> bindings = bind_symbols(graph, inputs);
  for (const Node* node : graph.nodes()) {
    std::vector<Tensor> cpu_args, dev_args;
    for (const Value* v : node->inputs) {
      cpu_args.push_back(reference.at(v));
      dev_args.push_back(cpu_args.back().to(device));
    }
    AttrMap attrs = concrete_attrs(node->attrs, bindings);
    std::vector<Tensor> want = run_op_at(node->kind, cpu_args, attrs, node->provenance);
    // Ops without inputs (constants) make their value on the host; only computed ones are compared.
    std::vector<Tensor> got =
        dev_args.empty() ? want : run_op_at(node->kind, dev_args, attrs, node->provenance);
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

}  // namespace kiln
