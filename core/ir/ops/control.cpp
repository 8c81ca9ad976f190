// Shape rules of the control-flow ops. while_loop(operands...) {carried=n, cond=graph, body=graph}:
// the first n operands are the loop-carried values, the rest are values the subgraphs read (captured
// from the enclosing graph). Both subgraphs take every operand as their inputs, in order; cond
// returns a one-element bool, body the next carried values. The outputs are the carried values when
// cond returns false.
#include "core/ir/graph.h"
#include "core/ir/op.h"

namespace kiln::ops {
namespace {

// A subgraph's symbolic dim takes the size its operand has when the loop runs (the subgraph binds
// its symbols from its inputs), so only static dims must agree.
bool same_type(const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype || a.rank() != b.rank()) return false;
  for (size_t d = 0; d < a.rank(); ++d)
    if (a.shape[d].is_static() && b.shape[d].is_static() && a.shape[d].value() != b.shape[d].value()) return false;
  return true;
}

std::string types_text(const std::vector<Value*>& values) {
  std::string s = "(";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i]->type.str();
  return s + ")";
}

void check_inputs(const InferContext& c, const Graph& sub, const std::string& which) {
  if (sub.inputs().size() != c.num_inputs())
    c.fail("the " + which + " subgraph takes " + std::to_string(sub.inputs().size()) + " inputs " +
           types_text(sub.inputs()) + "; the loop has " + std::to_string(c.num_inputs()) + " operands");
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (!same_type(sub.inputs()[i]->type, c.input(i)))
      c.fail("the " + which + " subgraph's input " + std::to_string(i) + " is " + sub.inputs()[i]->type.str() +
             ", the operand " + c.input(i).str());
}

std::vector<TensorType> while_loop_rule(const InferContext& c) {
  const int64_t carried = c.attrs().get_int("carried");
  if (carried < 1 || carried > int64_t(c.num_inputs()))
    c.fail("carried=" + std::to_string(carried) + " must count 1 to " + std::to_string(c.num_inputs()) +
           " of the operands");
  const Graph& cond = c.attrs().get_graph("cond");
  const Graph& body = c.attrs().get_graph("body");
  check_inputs(c, cond, "cond");
  check_inputs(c, body, "body");
  const auto one_bool = [](const TensorType& t) {
    for (const SymInt& d : t.shape)
      if (!d.is_static() || d.value() != 1) return false;
    return t.dtype == DType::Bool;
  };
  if (cond.outputs().size() != 1 || !one_bool(cond.outputs()[0]->type))
    c.fail("the cond subgraph must return one one-element bool, it returns " + types_text(cond.outputs()));
  std::vector<TensorType> out(c.inputs().begin(), c.inputs().begin() + carried);
  bool same = body.outputs().size() == out.size();
  for (size_t i = 0; same && i < out.size(); ++i) same = same_type(body.outputs()[i]->type, out[i]);
  if (!same)
    c.fail("the body subgraph returns " + types_text(body.outputs()) + "; it must return the " +
           std::to_string(carried) + " carried values' types");
  return out;
}

}  // namespace

void define_control(std::vector<OpDef>& t) {
  OpDef w;
  w.kind = OpKind::WhileLoop;
  w.attrs = {{"carried", AttrType::Int, std::nullopt},
             {"cond", AttrType::Graph, std::nullopt},
             {"body", AttrType::Graph, std::nullopt}};
  w.min_inputs = 1;
  w.max_inputs = -1;
  w.infer = while_loop_rule;
  t.push_back(std::move(w));
}

}  // namespace kiln::ops
