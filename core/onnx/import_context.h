// The importer's inner API: the value table, attribute access and node emission that every
// per-op mapping (ops_*.cpp) uses. Internal to core/onnx.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/onnx/onnx_import.h"
#include "kiln_onnx.pb.h"

namespace kiln::onnx::detail {

// Thrown by a mapping that cannot express a node (the op or an attribute value); the importer
// collects these and reports them all at once.
struct Unsupported {
  std::string reason;
};

// Thrown when an op needs a constant computed from graph inputs that ImportOptions::input_values
// gives values for: the importer restarts with those inputs fixed.
struct NeedInputValue {
  std::vector<std::string> names;
};

class ImportContext;

// An integer tensor of rank 0 or 1 known at import as SymInt expressions over the model's
// symbolic dims: what Shape gives of a tensor with symbolic dims, and the arithmetic exporters
// build on it (Gather, Unsqueeze, Concat, Div, ...). A `sym_ints` node holds it in the graph, so
// a reader that uses it as data computes it at run time; a fully static one is a constant.
struct ShapeValues {
  DType dtype = DType::I64;
  bool scalar = false;  // 0-d (one value) rather than 1-d
  std::vector<SymInt> values;
};

// The integers of `v` when known at import: a small integer or bool constant, or a sym_ints node.
std::optional<ShapeValues> shape_values_of(const Value* v);

// `kind` (attributes completed, result type `out`) on known integers, as SymInt arithmetic.
// nullopt where shape computations do not use the op: the node is then emitted and runs with the
// graph. Comparisons decide by the symbols' hints and record guards.
std::optional<ShapeValues> fold_shape_values(OpKind kind, const std::vector<ShapeValues>& inputs,
                                             const AttrMap& attrs, const TensorType& out);

// What an op mapping sees: one ONNX node, its operands and attributes, and ways to emit kiln ops.
class NodeContext {
 public:
  NodeContext(ImportContext& ctx, const kiln_onnx::NodeProto& node, int64_t opset);

  const std::string& op_type() const { return node_.op_type(); }
  int64_t opset() const { return opset_; }
  const Provenance& provenance() const { return provenance_; }

  // Inputs: optional ones may be absent (missing or an empty name).
  size_t num_inputs() const { return size_t(node_.input_size()); }
  bool has_input(size_t i) const;
  Value* input(size_t i) const;  // fails when absent
  const TensorType& input_type(size_t i) const { return input(i)->type; }
  // The input's value when it is constant (initializer, Constant, folded), else nullptr.
  const Literal* constant(size_t i) const;
  // The value, or kiln::Error / Unsupported saying the operand `what` must be constant.
  const Literal& require_constant(size_t i, const std::string& what) const;
  std::vector<int64_t> constant_ints(size_t i, const std::string& what) const;
  // Like constant_ints, but the values may be expressions of the symbolic dims (a shape operand
  // computed from Shape).
  std::vector<SymInt> sym_ints(size_t i, const std::string& what) const;
  std::vector<double> constant_floats(size_t i, const std::string& what) const;

  size_t num_outputs() const { return size_t(node_.output_size()); }
  bool has_output(size_t i) const { return i < num_outputs() && !node_.output(int(i)).empty(); }
  void set_output(size_t i, Value* v);

  // Attributes with defaults; a present attribute of the wrong kind is a kiln::Error.
  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<double> attr_floats(const std::string& name, std::vector<double> fallback = {}) const;
  std::vector<std::string> attr_strings(const std::string& name,
                                        std::vector<std::string> fallback = {}) const;
  Literal attr_tensor(const std::string& name) const;
  // The outputs of graph attribute `name` (If's branches, a Loop's body): its nodes are mapped into
  // this graph with the enclosing values in scope and its inputs bound to `inputs`; the names it
  // defines are dropped afterwards. Each call maps the nodes again (an unrolled iteration).
  std::vector<Value*> import_subgraph(const std::string& name, const std::vector<Value*>& inputs = {});
  // Graph attribute `name` as a kiln graph of its own (a Loop's body run by while_loop): its inputs
  // are `formal` (the attribute's inputs, in order), then `extra`, then one per enclosing value it
  // reads (`captured` receives those values; enclosing constants are copied in instead). Returns the
  // graph with the attribute's outputs as its outputs.
  struct Subgraph {
    std::shared_ptr<Graph> graph;
    std::vector<Value*> captured;
  };
  Subgraph import_subgraph_as_graph(const std::string& name, const std::vector<TensorType>& formal,
                                    const std::vector<TensorType>& extra);
  // The same with inputs `leading`, then one per enclosing value read; `bind` emits, through this
  // node's context over the new graph, the values the attribute's inputs take, from the leading
  // inputs (a Scan's elements, read from its whole sequences at the iteration's step).
  using BindInputs = std::function<std::vector<Value*>(NodeContext& b, const std::vector<Value*>& leading)>;
  Subgraph import_subgraph_as_graph(const std::string& name, const std::vector<TensorType>& leading,
                                    const BindInputs& bind);
  // An empty value table over graph `g` (a loop body an op mapping builds itself), with this
  // import's options; within() gives this node's context over it, so the same emitting code
  // builds ops into either graph.
  ImportContext context_for(Graph& g) const;
  NodeContext within(ImportContext& sub) const { return NodeContext(sub, node_, opset_); }
  // Rejects attributes that the mapping ignores when they hold a non-default value.
  void require_attr_int(const std::string& name, int64_t expected) const;

  // Emits one kiln op (folded at import time when every input is constant).
  Value* emit(OpKind kind, const std::vector<Value*>& inputs, const AttrMap& attrs = {});
  std::vector<Value*> emit_multi(OpKind kind, const std::vector<Value*>& inputs,
                                 const AttrMap& attrs = {});
  Value* constant_value(const Literal& literal);
  Value* shape_value(const ShapeValues& values);  // a constant when every value is static
  Value* scalar(double value, DType dtype);
  Value* cast(Value* v, DType dtype);  // no-op when already dtype
  Value* reshape(Value* v, const Shape& shape);

  [[noreturn]] void fail(const std::string& why) const;         // kiln::Error
  [[noreturn]] void unsupported(const std::string& why) const;  // collected

 private:
  const kiln_onnx::AttributeProto* find_attr(const std::string& name) const;

  ImportContext& ctx_;
  const kiln_onnx::NodeProto& node_;
  int64_t opset_;
  Provenance provenance_;
};

using OpMapping = std::function<void(NodeContext&)>;
using OpTable = std::map<std::string, OpMapping>;

// Conv's stride, dilation, padding (auto_pad resolved) and groups from a node's attributes, for
// input `x_input` and weights `w_input` (Conv, ConvInteger, QLinearConv).
AttrMap conv_attributes(NodeContext& n, size_t x_input, size_t w_input);

// Each op group registers its mappings (ops_*.cpp).
void register_elementwise_ops(OpTable& table);
void register_nn_ops(OpTable& table);
void register_reduce_ops(OpTable& table);
void register_tensor_ops(OpTable& table);
void register_composite_ops(OpTable& table);
void register_resize_ops(OpTable& table);  // Resize, Upsample, Einsum, TopK
void register_scatter_ops(OpTable& table);  // Scatter*, GatherND, Compress
void register_rnn_ops(OpTable& table);      // RNN, GRU, LSTM
void register_control_ops(OpTable& table);  // If
void register_quantize_ops(OpTable& table);  // QuantizeLinear, QLinear*, *Integer (in f32)

// The value table of one import.
class ImportContext {
 public:
  ImportContext(Graph& graph, const std::string& model_dir, const ImportOptions& options,
                const std::set<std::string>& fixed_inputs)
      : graph(graph), model_dir(model_dir), options(options), fixed_inputs(fixed_inputs) {}

  Graph& graph;
  std::string model_dir;
  const ImportOptions& options;
  const std::set<std::string>& fixed_inputs;
  std::map<std::string, Value*> values;       // ONNX value name -> kiln value
  std::set<std::string> real_inputs;          // names of the model's graph inputs
  std::set<const Value*> initializer_values;  // constants that came from initializers
  // Maps one node into a context as the importer does (collecting what is unsupported): for
  // subgraphs, inlined into this context or imported into a graph of their own.
  std::function<void(ImportContext&, const kiln_onnx::NodeProto&)> map_node;
};

// Shape decisions made on symbolic dims while importing, each with the node that made it.
class ImportGuards : public GuardSink {
 public:
  void record(const ShapeGuard& guard) override { guards.push_back({guard, node}); }
  std::string node;  // the node being mapped: "node /attn/Slice (Slice)"
  std::vector<ImportGuard> guards;
};

// A bool [rows, cols] mask of the cells (i, j) with j - i == k (Diagonal), >= k (Upper) or <= k
// (Lower): a constant for static sizes, computed at run time from aranges for symbolic ones.
// Trilu, EyeLike and CumSum build on it.
enum class Band { Diagonal, Upper, Lower };
Value* band_mask(NodeContext& n, const SymInt& rows, const SymInt& cols, int64_t k, Band band);

// Loops over a sequence whose length is known only at run time (ops_control.cpp: Loop, Scan;
// ops_rnn.cpp: the recurrences), built into loop bodies through a node's context over them.
// Step t's index into a sequence of `length`, counted from its end when `reverse`.
Value* step_index(NodeContext& b, Value* t, Value* length, bool reverse);
// Element `at` (an i64 scalar) of `whole` along `axis`, without that axis (index_select).
Value* element_at(NodeContext& b, Value* whole, int64_t axis, Value* at);
// `whole` with its element `at` along `axis` replaced by `element` (a `where` over `positions`,
// the i64 values 0 .. n-1 of that axis): a pass over the whole of it.
Value* with_element_at(NodeContext& b, Value* whole, int64_t axis, Value* positions, Value* at, Value* element);
// A while_loop node over `operands`, the first `carried` of them carried, with `body`; it runs
// while `predicate` holds, built through a context over the cond graph from its inputs (one per
// operand). Returns the node's outputs, one per carried value.
using LoopPredicate = std::function<Value*(NodeContext& c, const std::vector<Value*>& in)>;
std::vector<Value*> emit_while_loop(NodeContext& n, const std::vector<Value*>& operands, size_t carried,
                                    std::shared_ptr<Graph> body, const LoopPredicate& predicate);

// The literal held by a `constant` node's output, else nullptr.
const Literal* constant_of(const Value* v);

// A node's axis normalized against `rank` (a negative one counts from the end). An axis of a
// scalar is refused too: every caller reads the dim at the axis.
inline int64_t normalize_axis_or(NodeContext& n, int64_t axis, int64_t rank) {
  if (rank == 0) n.fail("axis " + std::to_string(axis) + " of a scalar: the op needs rank >= 1");
  if (axis < -rank || axis >= rank)
    n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace kiln::onnx::detail
