// Chrome trace JSON and Graphviz DOT from a bundle.
#include "core/trace/export.h"

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/support/error.h"

namespace kiln::trace {

namespace {

std::string origin_text(const Origin& o) {
  if (!o.imported.empty()) return o.imported;
  std::string file = o.file.substr(o.file.find_last_of('/') + 1);
  return file + ":" + std::to_string(o.line) + (o.scope.empty() ? "" : " [" + o.scope + "]");
}

// DOT double-quoted string contents.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}

}  // namespace

std::string chrome_trace_json(const Bundle& bundle) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0},
                    {"args", {{"name", "kiln " + bundle.name + " (" + bundle.device + ")"}}}});
  double clock = 0;
  for (size_t k = 0; k < bundle.kernels.size(); ++k) {
    const BundleKernel& kernel = bundle.kernels[k];
    double ts = kernel.start_us.value_or(clock);
    double dur = kernel.time_us.value_or(0);
    clock = ts + dur;
    json lines = json::array();
    for (int id : kernel.origins)
      if (const BundleNode* n = bundle.node(id))
        for (const Origin& o : n->origins) lines.push_back(n->op + " @ " + origin_text(o));
    events.push_back({{"name", kernel.name}, {"cat", "kernel"}, {"ph", "X"}, {"ts", ts}, {"dur", dur},
                      {"pid", 0}, {"tid", 0},
                      {"args", {{"kernel", k}, {"timed", kernel.time_us.has_value()},
                                {"bytes_read", kernel.bytes_read}, {"bytes_written", kernel.bytes_written},
                                {"flops", kernel.flops}, {"origins", lines}}}});
  }
  return json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump(1);
}

std::string graph_dot(const Bundle& bundle) {
  std::string out = "digraph \"" + dot_escape(bundle.name) + "\" {\n";
  out += "  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  std::map<int, std::string> producer;  // value id -> DOT node name
  for (const BundleInput& in : bundle.graph_inputs) {
    std::string name = "v" + std::to_string(in.value);
    producer[in.value] = name;
    out += "  " + name + " [shape=ellipse, label=\"" +
           dot_escape((in.name.empty() ? "%" + std::to_string(in.value) : in.name) + "\n" + in.type) + "\"];\n";
  }
  auto node_line = [&](const BundleNode& n, const std::string& indent) {
    std::string label = "%" + std::to_string(n.id) + " " + n.op;
    if (!n.output_types.empty()) label += "\n" + n.output_types.front();
    if (!n.origins.empty()) label += "\n" + origin_text(n.origins.front());
    return indent + "n" + std::to_string(n.id) + " [label=\"" + dot_escape(label) + "\"];\n";
  };
  std::map<int, int> kernel_of;
  for (size_t k = 0; k < bundle.kernels.size(); ++k)
    for (int id : bundle.kernels[k].origins) kernel_of.emplace(id, int(k));
  for (size_t k = 0; k < bundle.kernels.size(); ++k) {
    out += "  subgraph cluster_k" + std::to_string(k) + " {\n    label=\"" +
           dot_escape("kernel " + std::to_string(k) + ": " + bundle.kernels[k].name) +
           "\";\n    style=filled; color=\"#dde6f5\";\n";
    for (const BundleNode& n : bundle.nodes)
      if (kernel_of.count(n.id) && kernel_of[n.id] == int(k)) out += node_line(n, "    ");
    out += "  }\n";
  }
  for (const BundleNode& n : bundle.nodes) {
    if (!kernel_of.count(n.id)) out += node_line(n, "  ");
    for (int v : n.outputs) producer[v] = "n" + std::to_string(n.id);
  }
  for (const BundleNode& n : bundle.nodes)
    for (int v : n.inputs)
      if (producer.count(v)) out += "  " + producer[v] + " -> n" + std::to_string(n.id) + ";\n";
  for (size_t i = 0; i < bundle.graph_outputs.size(); ++i) {
    int v = bundle.graph_outputs[i];
    out += "  out" + std::to_string(i) + " [shape=ellipse, label=\"output " + std::to_string(i) + "\"];\n";
    if (producer.count(v)) out += "  " + producer[v] + " -> out" + std::to_string(i) + ";\n";
  }
  return out + "}\n";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("cannot write " + path);
}

}  // namespace kiln::trace
