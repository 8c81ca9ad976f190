// Filling a Bundle from kiln's own structures: a Graph's nodes, pass records, emitted kernels, and
// make_bundle's one-kernel-per-node lowering for graphs that were never compiled.
#include <algorithm>
#include <sstream>

#include "core/ir/text.h"
#include "core/kernel/lower.h"
#include "core/support/error.h"
#include "core/support/log.h"
#include "core/trace/bundle.h"

namespace kiln::trace {

const BundleNode* Bundle::node(int id) const {
  for (const BundleNode& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

int Bundle::kernel_of(int node_id) const {
  for (size_t k = 0; k < kernels.size(); ++k)
    if (std::find(kernels[k].origins.begin(), kernels[k].origins.end(), node_id) != kernels[k].origins.end())
      return int(k);
  return -1;
}

void record_graph(Bundle& bundle, const Graph& graph) {
  bundle.graph_inputs.clear();
  bundle.nodes.clear();
  bundle.graph_outputs.clear();
  for (const Value* v : graph.inputs()) bundle.graph_inputs.push_back({v->id, v->name, v->type.str()});
  for (const Node* n : graph.nodes()) {
    BundleNode bn;
    bn.id = n->id;
    bn.op = std::string(op_name(n->kind));
    for (const Value* v : n->inputs) {
      bn.inputs.push_back(v->id);
      bn.input_types.push_back(v->type.str());
    }
    for (const Value* v : n->outputs) {
      bn.outputs.push_back(v->id);
      bn.output_types.push_back(v->type.str());
    }
    bn.origins = n->provenance.origins;
    bundle.nodes.push_back(std::move(bn));
  }
  for (const Value* v : graph.outputs()) bundle.graph_outputs.push_back(v->id);
}

void record_passes(Bundle& bundle, const std::vector<PassRecord>& records) {
  for (const PassRecord& r : records) bundle.passes.push_back({r.name, r.ir_after, r.seconds, r.stats.counters});
}

void record_guards(Bundle& bundle, const std::vector<ShapeGuard>& guards) {
  for (const ShapeGuard& g : guards) {
    BundleNote note;
    note.text = g.lhs.str() + " " + guard_op_text(g.op) + " " + g.rhs.str() + " was " + (g.result ? "true" : "false");
    if (g.where) {
      note.file = g.where->file_name();
      note.line = int(g.where->line());
    }
    bundle.guards.push_back(std::move(note));
  }
}

KernelSource make_source(const kernel::EmittedKernel& emitted, kernel::Dialect dialect,
                         std::array<uint32_t, 3> groups) {
  KernelSource s;
  s.entry = emitted.entry;
  s.dialect = kernel::language_of(dialect);
  s.text = emitted.source;
  s.line_origins = emitted.line_origins;
  s.groups = groups;
  s.workgroup_size = emitted.workgroup_size;
  return s;
}

namespace {

int64_t elements(const TensorType& t) { return numel(t.shape).hint(); }

int64_t bytes(const TensorType& t) { return elements(t) * int64_t(dtype_size(t.dtype)); }

// The emitter tags the lines that compute a node's value; loads, index arithmetic and a reduction's
// combine step carry no tag. A kernel lowered from one node computes nothing else, so every statement
// of its body is that node's. Returns how many lines were untagged.
int attribute_body_lines(kernel::EmittedKernel& emitted, int node) {
  std::istringstream in(emitted.source);
  bool body = false;
  int count = 0;
  size_t i = 0;
  for (std::string line; std::getline(in, line) && i < emitted.line_origins.size(); ++i) {
    if (!body) {
      body = line.find("void main()") != std::string::npos || line.find("__global__") != std::string::npos;
      continue;
    }
    size_t text = line.find_first_not_of(" \t");
    if (text == std::string::npos || line[text] == '}' || line[text] == '{') continue;
    if (emitted.line_origins[i].empty()) {
      emitted.line_origins[i] = {node};
      ++count;
    }
  }
  return count;
}

}  // namespace

int64_t estimate_flops(const Node& node) {
  if (node.outputs.empty()) return 0;
  int64_t out = elements(node.output()->type);
  auto in = [&](size_t i) -> const TensorType& { return node.inputs.at(i)->type; };
  switch (op_def(node.kind).family) {
    case OpFamily::Unary: case OpFamily::Binary: return out;
    case OpFamily::Reduce: return node.inputs.empty() ? 0 : elements(in(0));
    case OpFamily::Norm: return node.inputs.empty() ? 0 : 5 * elements(in(0));
    case OpFamily::Shape: return 0;  // data movement
    case OpFamily::Control: return 0;  // its subgraphs' ops are counted where they run
    case OpFamily::Linalg: {
      // Every linalg op contracts over its first input's last dim.
      const Shape& a = in(0).shape;
      int64_t k = a.empty() ? 1 : a.back().hint();
      return 2 * out * k;
    }
    case OpFamily::Conv: {
      if (node.kind == OpKind::Conv || node.kind == OpKind::ConvTranspose) {
        // Weight [Cout, Cin/groups, k...]: each output element reads one filter.
        const TensorType& w = in(1);
        int64_t cout = w.shape.empty() ? 1 : std::max<int64_t>(w.shape[0].hint(), 1);
        int64_t per_filter = elements(w) / cout;
        if (node.kind == OpKind::ConvTranspose) return 2 * elements(in(0)) * elements(w) / std::max<int64_t>(1, w.shape[0].hint());
        return 2 * out * per_filter;
      }
      return node.inputs.empty() ? 0 : elements(in(0));  // pooling: one op per input element read
    }
  }
  return 0;
}

Bundle make_bundle(const Graph& graph, const MakeBundleOptions& options) {
  Bundle bundle;
  bundle.name = options.name;
  bundle.device = "none (not compiled)";
  record_graph(bundle, graph);
  bundle.passes.push_back({"input", print_graph(graph, options.name), 0, {}});

  // Symbolic sizes are launched at their traced values.
  std::map<std::string, int64_t> hints;
  for (const Value* v : graph.inputs())
    for (const SymInt& d : v->type.shape)
      if (!d.is_static() && d.str().find_first_of("+-*/%( ") == std::string::npos) hints.emplace(d.str(), d.hint());
  std::map<int, const Node*> by_id;
  for (const Node* n : graph.nodes()) by_id[n->id] = n;
  kernel::EmitOptions emit_options;
  emit_options.dialect = options.dialect;
  emit_options.describe_origin = [&](int id) {
    auto it = by_id.find(id);
    if (it == by_id.end()) return "%" + std::to_string(id);
    const Node& n = *it->second;
    std::string text = "%" + std::to_string(id) + " " + std::string(op_name(n.kind));
    if (!n.provenance.empty()) {
      const Origin& o = n.provenance.origins.front();
      if (!o.imported.empty()) text += " @ " + o.imported;
      else text += " @ " + o.file.substr(o.file.find_last_of('/') + 1) + ":" + std::to_string(o.line);
      if (!o.scope.empty()) text += " [" + o.scope + "]";
    }
    return text;
  };

  int untagged_lines = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& n = *graph.nodes()[i];
    BundleNode& bn = bundle.nodes[i];
    if (n.kind == OpKind::Constant) {
      bn.no_kernel = "constant: uploaded once, computed by no kernel";
      continue;
    }
    if (op_def(n.kind).family == OpFamily::Control) {
      bn.no_kernel = std::string(op_name(n.kind)) + ": runs its subgraphs (shown in the IR), each a program of its own";
      continue;
    }
    std::vector<TensorType> in_types, out_types;
    for (const Value* v : n.inputs) in_types.push_back(v->type);
    for (const Value* v : n.outputs) out_types.push_back(v->type);
    kernel::LoweredOp lowered;
    try {
      lowered = kernel::lower_op(n.kind, n.attrs, in_types, out_types, n.id);
    } catch (const Error& e) {
      throw Error("make_bundle: node %" + std::to_string(n.id) + " " + std::string(op_name(n.kind)) +
                  (n.provenance.empty() ? "" : " at " + n.provenance.str()) + ": " + e.what());
    }
    BundleKernel k;
    k.name = std::string(op_name(n.kind));
    k.origins = {n.id};
    for (const TensorType& t : in_types) k.bytes_read += bytes(t);
    for (const TensorType& t : out_types) k.bytes_written += bytes(t);
    k.flops = estimate_flops(n);
    k.phase = kernel_phase({n.provenance});
    for (const kernel::LoweredOp::Step& step : lowered.steps) {
      int64_t count = step.kernel.elements(hints);
      if (count == 0) continue;
      if (options.dialect != kernel::Dialect::Cpp)  // as eager one-node programs emit GPU kernels
        emit_options.static_params = step.kernel.static_param_values();
      kernel::EmittedKernel emitted = kernel::emit(step.kernel.kernel, emit_options);
      untagged_lines += attribute_body_lines(emitted, n.id);
      k.sources.push_back(make_source(emitted, options.dialect, kernel::launch_groups(emitted, count)));
      if (k.sources.size() == 1) k.name = step.kernel.kernel.name;
    }
    if (k.sources.empty()) {
      bn.no_kernel = "empty: no elements to compute";
      continue;
    }
    bundle.kernels.push_back(std::move(k));
  }
  if (untagged_lines > 0)
    log::debug("make_bundle: " + std::to_string(untagged_lines) +
               " kernel body lines had no origin from the emitter; attributed to their kernel's node");
  return bundle;
}

std::string kernel_phase(const std::vector<Provenance>& origins) {
  bool forward = false, backward = false, optimizer = false;
  for (const Provenance& p : origins)
    for (const Origin& o : p.origins) {
      if (!o.gradient_of.empty()) backward = true;
      else if (o.scope == "optim" || o.scope.rfind("optim.", 0) == 0) optimizer = true;
      else forward = true;
    }
  std::string phase;
  for (auto [on, name] : {std::pair{forward, "forward"}, {backward, "backward"}, {optimizer, "optimizer"}})
    if (on) phase += (phase.empty() ? "" : "+") + std::string(name);
  return phase.empty() ? "forward" : phase;
}

}  // namespace kiln::trace
