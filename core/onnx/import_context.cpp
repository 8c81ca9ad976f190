// NodeContext: operand and attribute access for op mappings, and emission with import-time folding.
#include "core/onnx/import_context.h"

#include <algorithm>
#include <cstring>

#include "core/frontend/dispatch.h"
#include "core/onnx/proto_io.h"
#include "core/support/error.h"

namespace kiln::onnx::detail {

const Literal* constant_of(const Value* v) {
  if (!v || !v->producer || v->producer->kind != OpKind::Constant) return nullptr;
  return &v->producer->attrs.get_tensor("value");
}

NodeContext::NodeContext(ImportContext& ctx, const kiln_onnx::NodeProto& node, int64_t opset)
    : ctx_(ctx), node_(node), opset_(opset) {
  Origin o;
  o.imported = (node.name().empty() ? node.output_size() ? node.output(0) : std::string("?")
                                    : node.name()) +
               " (" + node.op_type() + ")";
  provenance_.origins.push_back(o);
}

void NodeContext::fail(const std::string& why) const {
  throw Error("onnx node " + provenance_.origins[0].imported + ": " + why);
}

void NodeContext::unsupported(const std::string& why) const { throw Unsupported{why}; }

bool NodeContext::has_input(size_t i) const {
  return i < num_inputs() && !node_.input(int(i)).empty();
}

Value* NodeContext::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  auto it = ctx_.values.find(node_.input(int(i)));
  if (it == ctx_.values.end())
    fail("input '" + node_.input(int(i)) + "' is not defined before this node");
  return it->second;
}

const Literal* NodeContext::constant(size_t i) const {
  return has_input(i) ? constant_of(input(i)) : nullptr;
}

const Literal& NodeContext::require_constant(size_t i, const std::string& what) const {
  if (const Literal* lit = constant(i)) return *lit;
  Value* v = input(i);
  const std::string& name = node_.input(int(i));
  // Computed from graph inputs only, all with given values: fix them and import again.
  std::vector<std::string> deps;
  std::vector<const Value*> stack = {v};
  std::set<const Value*> seen;
  bool fixable = true;
  while (fixable && !stack.empty()) {
    const Value* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    if (!u->producer) {
      fixable = ctx_.options.input_values.count(u->name) && !ctx_.fixed_inputs.count(u->name);
      deps.push_back(u->name);
      continue;
    }
    for (const Value* w : u->producer->inputs) stack.push_back(w);
  }
  if (fixable && !deps.empty()) throw NeedInputValue{deps};
  if (std::optional<ShapeValues> sym = shape_values_of(v))
    unsupported("operand '" + what + "' ('" + name + "') is " + shape_str(sym->values) +
                ", computed from symbolic dims; this operand must be a constant");
  unsupported("operand '" + what + "' ('" + name + "', " + v->type.str() +
              ") is data-dependent: it is computed from tensor values by " +
              (v->producer ? "node " + v->producer->provenance.str() : std::string("a graph input")) +
              ", and it decides the output shape, so kiln needs it at import");
}

std::vector<SymInt> NodeContext::sym_ints(size_t i, const std::string& what) const {
  if (std::optional<ShapeValues> sym = has_input(i) ? shape_values_of(input(i)) : std::nullopt)
    if (sym->dtype != DType::Bool) return sym->values;
  const std::vector<int64_t> ints = constant_ints(i, what);
  return {ints.begin(), ints.end()};
}

std::vector<int64_t> NodeContext::constant_ints(size_t i, const std::string& what) const {
  const Literal& lit = require_constant(i, what);
  if (is_floating(lit.dtype)) fail("operand '" + what + "' must hold integers");
  std::vector<int64_t> out;
  for (int64_t k = 0; k < lit.numel(); ++k) out.push_back(int64_t(lit.element(k)));
  // element() goes through double: exact below 2^53, and i64 extremes (INT64_MAX as "to the end")
  // come back saturated, which is what slicing wants.
  if (lit.dtype == DType::I64 && lit.numel() > 0) {  // an empty vector's data() may be null
    out.resize(size_t(lit.numel()));
    std::memcpy(out.data(), lit.bytes.data(), out.size() * 8);
  }
  return out;
}

std::vector<double> NodeContext::constant_floats(size_t i, const std::string& what) const {
  const Literal& lit = require_constant(i, what);
  std::vector<double> out;
  for (int64_t k = 0; k < lit.numel(); ++k) out.push_back(lit.element(k));
  return out;
}

void NodeContext::set_output(size_t i, Value* v) {
  if (!has_output(i)) return;
  const std::string& name = node_.output(int(i));
  if (v->name.empty()) v->name = name;
  ctx_.values[name] = v;
}

const kiln_onnx::AttributeProto* NodeContext::find_attr(const std::string& name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool NodeContext::has_attr(const std::string& name) const { return find_attr(name) != nullptr; }

int64_t NodeContext::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = find_attr(name);
  if (!a) return fallback;
  if (a->type() != kiln_onnx::AttributeProto::INT) fail("attribute '" + name + "' must be an int");
  return a->i();
}

double NodeContext::attr_float(const std::string& name, double fallback) const {
  const auto* a = find_attr(name);
  if (!a) return fallback;
  if (a->type() == kiln_onnx::AttributeProto::INT) return double(a->i());
  if (a->type() != kiln_onnx::AttributeProto::FLOAT) fail("attribute '" + name + "' must be a float");
  return a->f();
}

std::string NodeContext::attr_string(const std::string& name, const std::string& fallback) const {
  const auto* a = find_attr(name);
  if (!a) return fallback;
  if (a->type() != kiln_onnx::AttributeProto::STRING) fail("attribute '" + name + "' must be a string");
  return a->s();
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name,
                                            std::vector<int64_t> fallback) const {
  const auto* a = find_attr(name);
  if (!a) return fallback;
  if (a->type() != kiln_onnx::AttributeProto::INTS) fail("attribute '" + name + "' must be ints");
  return {a->ints().begin(), a->ints().end()};
}

std::vector<double> NodeContext::attr_floats(const std::string& name,
                                             std::vector<double> fallback) const {
  const auto* a = find_attr(name);
  if (!a) return fallback;
  if (a->type() != kiln_onnx::AttributeProto::FLOATS) fail("attribute '" + name + "' must be floats");
  return {a->floats().begin(), a->floats().end()};
}

std::vector<std::string> NodeContext::attr_strings(const std::string& name,
                                                  std::vector<std::string> fallback) const {
  const auto* a = find_attr(name);
  if (!a) return fallback;
  if (a->type() != kiln_onnx::AttributeProto::STRINGS) fail("attribute '" + name + "' must be strings");
  return {a->strings().begin(), a->strings().end()};
}

Literal NodeContext::attr_tensor(const std::string& name) const {
  const auto* a = find_attr(name);
  if (!a || a->type() != kiln_onnx::AttributeProto::TENSOR)
    fail("attribute '" + name + "' must be a tensor");
  try {
    return literal_from_proto(a->t(), ctx_.model_dir, "attribute '" + name + "'");
  } catch (const Error& e) {
    unsupported(e.what());
  }
}

std::vector<Value*> NodeContext::import_subgraph(const std::string& name,
                                                 const std::vector<Value*>& inputs) {
  const auto* a = find_attr(name);
  if (!a || a->type() != kiln_onnx::AttributeProto::GRAPH) fail("attribute '" + name + "' must be a graph");
  if (inputs.size() != size_t(a->g().input_size()))
    fail(name + " takes " + std::to_string(a->g().input_size()) + " inputs, the node gives " +
         std::to_string(inputs.size()));
  const std::map<std::string, Value*> outer = ctx_.values;
  for (size_t k = 0; k < inputs.size(); ++k) ctx_.values[a->g().input(int(k)).name()] = inputs[k];
  for (const auto& node : a->g().node()) ctx_.map_node(ctx_, node);
  std::vector<Value*> outputs;
  for (const auto& out : a->g().output()) {
    auto it = ctx_.values.find(out.name());
    if (it == ctx_.values.end()) {
      ctx_.values = outer;
      unsupported(name + " output '" + out.name() + "' is not produced");
    }
    outputs.push_back(it->second);
  }
  ctx_.values = outer;
  return outputs;
}

namespace {

// The names a graph's nodes read (in nested graph attributes too) that it does not define itself.
void free_names(const kiln_onnx::GraphProto& g, std::set<std::string>* defined, std::vector<std::string>* free) {
  for (const auto& in : g.input()) defined->insert(in.name());
  for (const auto& init : g.initializer()) defined->insert(init.name());
  for (const auto& node : g.node()) {
    for (const auto& in : node.input())
      if (!in.empty() && !defined->count(in) && std::find(free->begin(), free->end(), in) == free->end())
        free->push_back(in);
    for (const auto& a : node.attribute())
      if (a.type() == kiln_onnx::AttributeProto::GRAPH) {
        std::set<std::string> inner = *defined;
        free_names(a.g(), &inner, free);
      }
    for (const auto& out : node.output()) defined->insert(out);
  }
}

}  // namespace

NodeContext::Subgraph NodeContext::import_subgraph_as_graph(const std::string& name,
                                                            const std::vector<TensorType>& formal,
                                                            const std::vector<TensorType>& extra) {
  std::vector<TensorType> leading = formal;
  leading.insert(leading.end(), extra.begin(), extra.end());
  return import_subgraph_as_graph(name, leading, [&](NodeContext&, const std::vector<Value*>& in) {
    return std::vector<Value*>(in.begin(), in.begin() + long(formal.size()));
  });
}

NodeContext::Subgraph NodeContext::import_subgraph_as_graph(const std::string& name,
                                                            const std::vector<TensorType>& leading,
                                                            const BindInputs& bind) {
  const auto* a = find_attr(name);
  if (!a || a->type() != kiln_onnx::AttributeProto::GRAPH) fail("attribute '" + name + "' must be a graph");
  const kiln_onnx::GraphProto& body = a->g();
  if (body.initializer_size() > 0) unsupported(name + " with initializers of its own, run as a loop");
  Subgraph out;
  out.graph = std::make_shared<Graph>();
  Graph& g = *out.graph;
  ImportContext sub = context_for(g);
  std::vector<Value*> in;
  for (const TensorType& t : leading) in.push_back(g.add_input(t));
  NodeContext binder = within(sub);
  const std::vector<Value*> formal = bind(binder, in);
  if (formal.size() != size_t(body.input_size()))
    fail(name + " takes " + std::to_string(body.input_size()) + " inputs, the node gives " +
         std::to_string(formal.size()));
  for (size_t k = 0; k < formal.size(); ++k) {
    sub.values[body.input(int(k)).name()] = formal[k];
    if (formal[k]->name.empty()) formal[k]->name = body.input(int(k)).name();
  }
  std::set<std::string> defined;
  std::vector<std::string> free;
  free_names(body, &defined, &free);
  for (const std::string& outer_name : free) {
    auto it = ctx_.values.find(outer_name);
    if (it == ctx_.values.end()) continue;  // unknown: its reader says so
    if (const Literal* lit = constant_of(it->second)) {
      Node* c = g.add_node(OpKind::Constant, {}, {{"value", std::make_shared<const Literal>(*lit)}}, provenance_);
      sub.values[outer_name] = c->output();
    } else {
      sub.values[outer_name] = g.add_input(it->second->type, outer_name);
      out.captured.push_back(it->second);
    }
  }
  for (const auto& node : body.node()) ctx_.map_node(sub, node);
  std::vector<Value*> outputs;
  for (const auto& o : body.output()) {
    auto it = sub.values.find(o.name());
    if (it == sub.values.end()) unsupported(name + " output '" + o.name() + "' is not produced");
    outputs.push_back(it->second);
  }
  g.set_outputs(outputs);
  return out;
}

ImportContext NodeContext::context_for(Graph& g) const {
  ImportContext sub(g, ctx_.model_dir, ctx_.options, ctx_.fixed_inputs);
  sub.map_node = ctx_.map_node;
  return sub;
}

void NodeContext::require_attr_int(const std::string& name, int64_t expected) const {
  const int64_t v = attr_int(name, expected);
  if (v != expected)
    unsupported("attribute " + name + "=" + std::to_string(v) + " (only " +
                std::to_string(expected) + " is supported)");
}

namespace {

bool has_symbolic_attr(const AttrMap& attrs) {
  for (const auto& [name, attr] : attrs)
    if (const auto* syms = std::get_if<std::vector<SymInt>>(&attr))
      if (!is_static(*syms)) return true;
  return false;
}

}  // namespace

std::vector<Value*> NodeContext::emit_multi(OpKind kind, const std::vector<Value*>& inputs,
                                            const AttrMap& attrs) {
  bool all_constant = !inputs.empty() && !has_symbolic_attr(attrs);
  for (Value* v : inputs) all_constant = all_constant && constant_of(v) != nullptr;
  if (!all_constant) {
    // Shape arithmetic on symbolic dims folds to SymInt expressions; other ops run with the graph.
    std::vector<ShapeValues> known;
    for (Value* v : inputs)
      if (std::optional<ShapeValues> k = shape_values_of(v)) known.push_back(std::move(*k));
    Node* node = ctx_.graph.add_node(kind, inputs, attrs, provenance_);
    if (known.size() != inputs.size() || node->outputs.size() != 1) return node->outputs;
    std::optional<ShapeValues> folded =
        fold_shape_values(kind, known, node->attrs, node->outputs[0]->type);
    return {folded ? shape_value(*folded) : node->outputs[0]};
  }
  // Import-time folding on the cpu reference: shape arithmetic becomes attributes downstream.
  std::vector<Tensor> args;
  for (Value* v : inputs) args.push_back(literal_to_tensor(*constant_of(v)));
  std::vector<Tensor> outs = run_op_at(kind, args, attrs, provenance_);
  std::vector<Value*> result;
  for (const Tensor& t : outs) result.push_back(constant_value(tensor_to_literal(t)));
  for (Value* v : inputs)
    if (ctx_.initializer_values.count(v))  // a weight folded (transposed, cast) stays a weight
      for (Value* r : result) ctx_.initializer_values.insert(r);
  return result;
}

Value* NodeContext::emit(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs) {
  std::vector<Value*> outs = emit_multi(kind, inputs, attrs);
  if (outs.size() != 1) fail("internal: expected one output from " + std::string(op_name(kind)));
  return outs[0];
}

Value* NodeContext::constant_value(const Literal& literal) {
  AttrMap attrs;
  attrs.set("value", std::make_shared<const Literal>(literal));
  return ctx_.graph.add_node(OpKind::Constant, {}, attrs, provenance_)->output();
}

Value* NodeContext::shape_value(const ShapeValues& sym) {
  if (is_static(sym.values)) {
    Literal lit;
    lit.dtype = sym.dtype;
    if (!sym.scalar) lit.shape = {int64_t(sym.values.size())};
    lit.bytes.resize(sym.values.size() * dtype_size(sym.dtype));
    for (size_t i = 0; i < sym.values.size(); ++i) {
      const int64_t v = sym.values[i].value();
      convert_elements(&v, DType::I64, lit.bytes.data() + i * dtype_size(sym.dtype), sym.dtype, 1);
    }
    return constant_value(lit);
  }
  return ctx_.graph
      .add_node(OpKind::SymInts, {},
                {{"values", sym.values}, {"dtype", sym.dtype}, {"scalar", sym.scalar}}, provenance_)
      ->output();
}

Value* NodeContext::scalar(double value, DType dtype) {
  Literal lit;
  lit.dtype = dtype;
  lit.bytes.resize(dtype_size(dtype));
  convert_elements(&value, DType::F64, lit.bytes.data(), dtype, 1);
  return constant_value(lit);
}

Value* NodeContext::cast(Value* v, DType dtype) {
  if (v->type.dtype == dtype) return v;
  return emit(OpKind::Cast, {v}, {{"dtype", dtype}});
}

Value* NodeContext::reshape(Value* v, const Shape& shape) {
  return emit(OpKind::Reshape, {v}, {{"shape", shape}});
}

}  // namespace kiln::onnx::detail
