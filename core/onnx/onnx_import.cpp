// import_onnx: reads the model, declares inputs and initializers, maps every node through the op
// table (collecting all unsupported ones), then turns weights into captured graph inputs.
#include "core/onnx/onnx_import.h"

#include <cctype>
#include <filesystem>
#include <set>

#include "core/onnx/import_context.h"
#include "core/onnx/proto_io.h"

namespace kiln::onnx {
namespace detail {
namespace {

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_elementwise_ops(t);
    register_nn_ops(t);
    register_reduce_ops(t);
    register_tensor_ops(t);
    register_composite_ops(t);
    register_resize_ops(t);
    register_scatter_ops(t);
    register_rnn_ops(t);
    register_control_ops(t);
    register_quantize_ops(t);
    return t;
  }();
  return table;
}

// dim_param text -> a SymInt symbol name ([a-z_][a-z0-9_]*).
std::string symbol_name(const std::string& param) {
  std::string s;
  for (char c : param) s += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(c)) : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "d_" + s;
  return s;
}

Value* add_constant(Graph& g, const Literal& lit, const std::string& origin) {
  Origin o;
  o.imported = origin;
  Provenance p;
  p.origins.push_back(o);
  AttrMap attrs;
  attrs.set("value", std::make_shared<const Literal>(lit));
  return g.add_node(OpKind::Constant, {}, attrs, p)->output();
}

struct Importer {
  const kiln_onnx::ModelProto& model;
  const std::string& path;
  const ImportOptions& options;
  const std::set<std::string>& fixed;
  int64_t opset;

  std::vector<std::string> unsupported;
  std::set<std::string> poisoned;  // values of unsupported nodes: readers are skipped
  ImportGuards guards;

  std::vector<int64_t> actual_shape(const std::string& name) const {
    if (auto it = options.input_shapes.find(name); it != options.input_shapes.end()) return it->second;
    if (auto it = options.input_values.find(name); it != options.input_values.end())
      return it->second.shape;
    return {};
  }

  // The declared type of a graph input, with symbols for dim_params. False: unsupported dtype.
  bool input_type(const kiln_onnx::ValueInfoProto& vi, TensorType* out) {
    const std::string& name = vi.name();
    if (!vi.type().has_tensor_type()) {
      unsupported.push_back("input '" + name + "': only tensor inputs are supported");
      return false;
    }
    const auto& tt = vi.type().tensor_type();
    if (!dtype_from_onnx(tt.elem_type(), &out->dtype)) {
      unsupported.push_back("input '" + name + "': element type " +
                            onnx_type_name(tt.elem_type()) + " is not supported");
      return false;
    }
    const std::vector<int64_t> actual = actual_shape(name);
    if (!actual.empty() && tt.has_shape() && int64_t(actual.size()) != tt.shape().dim_size())
      throw Error("onnx import: input '" + name + "' is declared with rank " +
                  std::to_string(tt.shape().dim_size()) + ", the given value has rank " +
                  std::to_string(actual.size()));
    if (!tt.has_shape()) {
      if (actual.empty() && options.input_shapes.count(name) == 0)
        unsupported.push_back("input '" + name + "': no declared shape (give its size)");
      out->shape = make_shape(actual);
      return !actual.empty() || options.input_shapes.count(name);
    }
    out->shape.clear();
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      const int64_t hint = i < int64_t(actual.size()) ? actual[size_t(i)] : -1;
      if (d.has_dim_value()) {
        if (d.dim_value() < 0)
          throw Error("onnx import: input '" + name + "' has dim " + std::to_string(i) + " = " +
                      std::to_string(d.dim_value()) + "; dims are sizes, at least 0");
        if (hint >= 0 && hint != d.dim_value())
          throw Error("onnx import: shape conflict: input '" + name + "' is declared with dim " +
                      std::to_string(i) + " = " + std::to_string(d.dim_value()) +
                      ", the given value has " + std::to_string(hint));
        out->shape.push_back(d.dim_value());
      } else if (d.has_dim_param() && !d.dim_param().empty()) {
        out->shape.push_back(SymInt::symbol(symbol_name(d.dim_param()), hint >= 0 ? hint : 1));
      } else if (hint >= 0) {
        out->shape.push_back(hint);
      } else {
        out->shape.push_back(SymInt::symbol(symbol_name(name + "_" + std::to_string(i)), 1));
      }
    }
    return true;
  }

  // An op without a mapping: "op not supported", or why kiln cannot express it.
  static std::string why_not_supported(const std::string& op_type) {
    static const std::set<std::string> data_dependent = {"NonZero", "Unique", "NonMaxSuppression"};
    if (data_dependent.count(op_type))
      return "op not supported: its output's size depends on the input's values, and kiln sizes "
             "every value from the input shapes";
    return "op not supported";
  }

  void map_node(ImportContext& ctx, const kiln_onnx::NodeProto& node) {
    const std::string label = node.op_type() + " (" +
                              (node.name().empty() ? "unnamed" : "'" + node.name() + "'") + ")";
    auto poison = [&] {
      for (const auto& o : node.output()) poisoned.insert(o);
    };
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      unsupported.push_back(label + ": domain '" + node.domain() + "' is not supported");
      return poison();
    }
    auto it = op_table().find(node.op_type());
    if (it == op_table().end()) {
      unsupported.push_back(label + ": " + why_not_supported(node.op_type()));
      return poison();
    }
    for (const auto& in : node.input())
      if (poisoned.count(in)) return poison();
    NodeContext n(ctx, node, opset);
    guards.node = "node " + n.provenance().origins[0].imported;
    try {
      it->second(n);
      for (int i = 0; i < node.output_size(); ++i)
        if (!node.output(i).empty() && !ctx.values.count(node.output(i)))
          n.unsupported("output " + std::to_string(i) + " ('" + node.output(i) + "') is not produced");
    } catch (const Unsupported& u) {
      unsupported.push_back(label + ": " + u.reason);
      return poison();
    }
  }

  // A value or shape given for a name that is not one of the model's inputs is a typo: refuse it
  // with the names the model has, instead of ignoring it.
  void check_given_inputs(const kiln_onnx::GraphProto& graph, const std::set<std::string>& initializers) {
    std::set<std::string> names;
    std::string listed;
    for (const auto& vi : graph.input())
      if (!initializers.count(vi.name()) && names.insert(vi.name()).second)
        listed += (listed.empty() ? "'" : ", '") + vi.name() + "'";
    auto check = [&](const std::string& name, const char* what) {
      if (!names.count(name))
        throw Error("onnx import: " + std::string(what) + " given for '" + name + "', which is not an input of '" +
                    path + "'; its inputs are " + (listed.empty() ? "none" : listed));
    };
    for (const auto& [name, value] : options.input_values) check(name, "a value");
    for (const auto& [name, shape] : options.input_shapes) check(name, "a shape");
  }

  ImportedModel run() {
    ImportedModel result;
    result.opset = opset;
    result.producer = model.producer_name() +
                      (model.producer_version().empty() ? "" : " " + model.producer_version());
    Graph& g = result.graph;
    const std::string dir = std::filesystem::path(path).parent_path().string();
    ImportContext ctx(g, dir, options, fixed);
    ctx.map_node = [this](ImportContext& into, const kiln_onnx::NodeProto& node) { map_node(into, node); };
    const auto& graph = model.graph();

    std::set<std::string> initializer_names;
    for (const auto& init : graph.initializer()) initializer_names.insert(init.name());
    check_given_inputs(graph, initializer_names);
    for (const auto& vi : graph.input()) {
      if (initializer_names.count(vi.name()) || fixed.count(vi.name())) continue;
      ctx.real_inputs.insert(vi.name());
      TensorType type;
      if (!input_type(vi, &type)) {
        poisoned.insert(vi.name());
        continue;
      }
      Value* v = g.add_input(type, vi.name());
      ctx.values[vi.name()] = v;
      result.inputs.push_back({vi.name(), type});
    }
    for (const auto& init : graph.initializer()) {
      Literal lit;
      try {
        lit = literal_from_proto(init, dir, "initializer '" + init.name() + "'");
      } catch (const Error& e) {
        if (!dtype_from_onnx(init.data_type(), &lit.dtype)) {
          unsupported.push_back(e.what());
          poisoned.insert(init.name());
          continue;
        }
        throw Error(std::string("onnx import: ") + e.what());
      }
      Value* v = add_constant(g, lit, "initializer " + init.name());
      v->name = init.name();
      ctx.values[init.name()] = v;
      ctx.initializer_values.insert(v);
    }
    for (const std::string& name : fixed) {
      Value* v = add_constant(g, options.input_values.at(name), "input " + name);
      v->name = name;
      ctx.values[name] = v;
    }
    {
      GuardSinkScope record_guards(&guards);
      for (const auto& node : graph.node()) map_node(ctx, node);
    }
    result.guards = std::move(guards.guards);

    if (!unsupported.empty()) {
      std::string msg = "onnx import: '" + path + "' uses " + std::to_string(unsupported.size()) +
                        " unsupported item" + (unsupported.size() > 1 ? "s" : "") + ":";
      for (const std::string& u : unsupported) msg += "\n  " + u;
      throw UnsupportedError(msg);
    }
    for (const auto& vi : graph.output()) {
      auto it = ctx.values.find(vi.name());
      if (it == ctx.values.end())
        throw Error("onnx import: graph output '" + vi.name() + "' is not produced by any node");
      check_declared(vi, it->second->type);
      g.add_output(it->second);
      result.outputs.push_back({vi.name(), it->second->type});
    }
    capture_weights(result, ctx);
    return result;
  }

  // Static declared dims must agree with the ones kiln computed.
  void check_declared(const kiln_onnx::ValueInfoProto& vi, const TensorType& got) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    const auto& shape = vi.type().tensor_type().shape();
    bool conflict = shape.dim_size() != int(got.rank());
    for (int i = 0; !conflict && i < shape.dim_size(); ++i)
      conflict = shape.dim(i).has_dim_value() && got.shape[size_t(i)].is_static() &&
                 shape.dim(i).dim_value() != got.shape[size_t(i)].value();
    if (conflict)
      throw Error("onnx import: shape conflict: output '" + vi.name() + "' is declared " +
                  "with " + std::to_string(shape.dim_size()) + " dims [" + dims_text(shape) +
                  "], the model computes " + got.str());
  }

  static std::string dims_text(const kiln_onnx::TensorShapeProto& shape) {
    std::string s;
    for (int i = 0; i < shape.dim_size(); ++i)
      s += (i ? "," : "") + (shape.dim(i).has_dim_value() ? std::to_string(shape.dim(i).dim_value())
                                                          : shape.dim(i).dim_param());
    return s;
  }

  // Initializers and large constants still in use become trailing graph inputs.
  void capture_weights(ImportedModel& result, ImportContext& ctx) {
    Graph& g = result.graph;
    g.remove_dead_nodes();
    for (Node* node : g.nodes()) {
      if (node->kind != OpKind::Constant) continue;
      Value* out = node->output();
      const Literal& lit = node->attrs.get_tensor("value");
      if (!ctx.initializer_values.count(out) && lit.numel() <= kInlineConstantLimit) continue;
      Value* in = g.add_input(out->type, out->name);
      g.replace_uses(out, in);
      result.captured.push_back(literal_to_tensor(lit));
    }
    g.remove_dead_nodes();
  }
};

}  // namespace
}  // namespace detail

std::vector<std::string> graph_input_names(const std::string& path) {
  const kiln_onnx::ModelProto model = detail::read_model_proto(path);
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> names;
  for (const auto& vi : model.graph().input())
    if (!initializers.count(vi.name())) names.push_back(vi.name());
  return names;
}

ImportedModel import_onnx(const std::string& path, const ImportOptions& options) {
  const kiln_onnx::ModelProto model = detail::read_model_proto(path);
  int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 0) {
    std::string domains;
    for (const auto& o : model.opset_import()) domains += " '" + o.domain() + "'";
    throw UnsupportedError("onnx import: '" + path + "' uses only the op domain(s)" + domains +
                           "; kiln imports ai.onnx");
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    throw UnsupportedError("onnx import: '" + path + "' uses opset " + std::to_string(opset) +
                           "; kiln imports opsets " + std::to_string(kMinOpset) + " to " +
                           std::to_string(kMaxOpset));
  std::set<std::string> fixed;
  for (;;) {
    try {
      detail::Importer importer{model, path, options, fixed, opset, {}, {}, {}};
      return importer.run();
    } catch (const detail::NeedInputValue& need) {
      size_t before = fixed.size();
      fixed.insert(need.names.begin(), need.names.end());
      if (fixed.size() == before) throw Error("onnx import: internal: inputs requested twice");
    }
  }
}

}  // namespace kiln::onnx
