// ONNX control flow -> kiln ops. If: both branches are imported into the graph and each output
// selects between them (where), as kiln::cond traces; a condition known at import picks one
// branch. Loop is unrolled at import while its trip count and conditions are known, and runs as a
// while_loop from where they are not (without scan outputs, whose size that would decide). Scan is
// unrolled over a static sequence length and runs as a while_loop over a symbolic one.
#include <algorithm>

#include "core/onnx/import_context.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;

// Unrolling copies the body once per step; past this many steps the graph would take the memory.
constexpr int64_t kMaxUnrolledSteps = 4096;

void check_unroll(N& n, int64_t steps) {
  if (steps > kMaxUnrolledSteps)
    n.unsupported(std::to_string(steps) + " steps: kiln unrolls loops at import, at most " +
                  std::to_string(kMaxUnrolledSteps));
}

bool same_type(const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype || a.rank() != b.rank()) return false;
  for (size_t d = 0; d < a.rank(); ++d)
    if (!(a.shape[d] == b.shape[d])) return false;
  return true;
}

void map_if(N& n) {
  Value* c = n.input(0);
  if (c->type.dtype != DType::Bool || !is_static(c->type.shape) || numel(c->type.shape).value() != 1)
    n.fail("the condition must be one bool, got " + c->type.str());
  const std::vector<Value*> then_out = n.import_subgraph("then_branch");
  const std::vector<Value*> else_out = n.import_subgraph("else_branch");
  if (then_out.size() != else_out.size() || then_out.size() != n.num_outputs())
    n.fail("then_branch has " + std::to_string(then_out.size()) + " outputs, else_branch " +
           std::to_string(else_out.size()) + ", the node " + std::to_string(n.num_outputs()));
  if (const Literal* known = constant_of(c)) {
    const std::vector<Value*>& taken = known->element(0) != 0 ? then_out : else_out;
    for (size_t i = 0; i < taken.size(); ++i) n.set_output(i, taken[i]);
    return;
  }
  Value* flag = c->type.rank() == 0 ? c : n.reshape(c, {});
  for (size_t i = 0; i < then_out.size(); ++i) {
    if (!same_type(then_out[i]->type, else_out[i]->type))
      n.unsupported("output " + std::to_string(i) + " is " + then_out[i]->type.str() +
                    " in then_branch and " + else_out[i]->type.str() +
                    " in else_branch; kiln selects between the branches, so their outputs must match");
    n.set_output(i, n.emit(OpKind::Where, {flag, then_out[i], else_out[i]}));
  }
}

// Scan outputs gathered per iteration, stacked along `axis` in iteration order.
Value* stack(N& n, const std::vector<Value*>& parts, int64_t axis) {
  std::vector<Value*> wide;
  for (Value* p : parts) {
    Shape s = p->type.shape;
    const int64_t a = axis < 0 ? axis + int64_t(s.size()) + 1 : axis;
    s.insert(s.begin() + a, SymInt(1));
    wide.push_back(n.reshape(p, s));
  }
  return wide.size() == 1 ? wide[0] : n.emit(OpKind::Concat, wide, {{"dim", axis}});
}

Value* scalar_i64(N& n, int64_t v) { return n.scalar(double(v), DType::I64); }

// A Loop whose iterations are not all known at import, from iteration `first` on, as one
// while_loop: carried (i, cond, v...), then the trip count M (when given) and the enclosing values
// the body reads. Its cond subgraph is i < M and cond; its body is the ONNX body, plus i + 1.
// Scan outputs would grow with each iteration, so a Loop with them stays unsupported here.
void loop_on_device(N& n, int64_t first, Value* go, std::vector<Value*> carried) {
  const size_t scan_count = n.num_outputs() - carried.size();
  if (scan_count > 0)
    n.unsupported("a Loop whose iteration count is known only at run time, with scan outputs (they would "
                  "grow with each iteration; kiln's while_loop keeps each value's shape)");
  Value* trips = n.has_input(0) ? n.cast(n.input(0), DType::I64) : nullptr;
  if (trips && trips->type.rank() != 0) trips = n.reshape(trips, {});
  std::vector<Value*> operands = {scalar_i64(n, first), go->type.rank() == 0 ? go : n.reshape(go, {})};
  operands.insert(operands.end(), carried.begin(), carried.end());
  std::vector<TensorType> carried_types;
  for (Value* v : operands) carried_types.push_back(v->type);
  std::vector<TensorType> extra;
  if (trips) extra.push_back(trips->type);
  NodeContext::Subgraph body = n.import_subgraph_as_graph("body", carried_types, extra);
  if (trips) operands.push_back(trips);
  operands.insert(operands.end(), body.captured.begin(), body.captured.end());

  // The body's results: i + 1, its condition as one bool, its carried values.
  Graph& b = *body.graph;
  std::vector<Value*> results = b.outputs();
  if (results.size() != carried.size() + 1)
    n.fail("the body gives " + std::to_string(results.size()) + " outputs for " + std::to_string(carried.size()) +
           " carried values");
  const Provenance& where = n.provenance();
  auto one = [&](DType dtype) {
    Literal lit;
    lit.dtype = dtype;
    lit.bytes.assign(dtype_size(dtype), 0);
    const int64_t v = 1;
    convert_elements(&v, DType::I64, lit.bytes.data(), dtype, 1);
    return b.add_node(OpKind::Constant, {}, {{"value", std::make_shared<const Literal>(lit)}}, where)->output();
  };
  Value* next_i = b.add_node(OpKind::Add, {b.inputs()[0], one(DType::I64)}, {}, where)->output();
  Value* again = results[0];
  if (again->type.dtype != DType::Bool) again = b.add_node(OpKind::Cast, {again}, {{"dtype", DType::Bool}}, where)->output();
  if (again->type.rank() != 0) again = b.add_node(OpKind::Reshape, {again}, {{"shape", std::vector<SymInt>{}}}, where)->output();
  std::vector<Value*> next = {next_i, again};
  for (size_t k = 0; k < carried.size(); ++k) {
    Value* v = results[1 + k];
    if (!same_type(v->type, carried[k]->type))
      n.unsupported("loop-carried value " + std::to_string(k) + " is " + carried[k]->type.str() +
                    " before the body and " + v->type.str() + " after it; a loop run at run time keeps each " +
                    "value's type");
    next.push_back(v);
  }
  b.set_outputs(next);

  // cond: i < M (the first operand after the carried ones) and the carried condition.
  const size_t carried_count = carried.size() + 2;
  const LoopPredicate again_and_below_trips = [&](N& c, const std::vector<Value*>& in) {
    return trips ? c.emit(OpKind::LogicalAnd, {c.emit(OpKind::Lt, {in[0], in[carried_count]}), in[1]}) : in[1];
  };
  const std::vector<Value*> out = emit_while_loop(n, operands, carried_count, body.graph, again_and_below_trips);
  for (size_t k = 0; k < carried.size(); ++k) n.set_output(k, out[2 + k]);
}

// Loop: unrolled at import while its trip count and each iteration's condition are known (the
// iterations then fuse like any other ops); from the first iteration whose condition is computed
// from tensor values, or when the trip count is not a constant, the rest runs as a while_loop.
void map_loop(N& n) {
  std::vector<Value*> carried;
  for (size_t i = 2; i < n.num_inputs(); ++i) carried.push_back(n.input(i));
  const Literal* trip_count = n.has_input(0) ? n.constant(0) : nullptr;
  const Literal* first_cond = n.has_input(1) ? n.constant(1) : nullptr;
  if (!trip_count || trip_count->element(0) > double(kMaxUnrolledSteps) || (n.has_input(1) && !first_cond)) {
    Value* go = n.has_input(1) ? n.cast(n.input(1), DType::Bool) : n.scalar(1, DType::Bool);
    return loop_on_device(n, 0, go, carried);
  }
  const int64_t trips = int64_t(trip_count->element(0));
  bool go = !first_cond || first_cond->element(0) != 0;
  std::vector<std::vector<Value*>> scans;
  for (int64_t i = 0; i < trips && go; ++i) {
    std::vector<Value*> in = {scalar_i64(n, i), n.scalar(1, DType::Bool)};
    in.insert(in.end(), carried.begin(), carried.end());
    const std::vector<Value*> out = n.import_subgraph("body", in);
    if (out.size() < 1 + carried.size()) n.fail("the body gives fewer outputs than the carried values");
    const Literal* again = constant_of(out[0]);
    if (!again)  // this iteration's unrolled copy goes unused (dce drops it): the loop runs it
      return loop_on_device(n, i, n.scalar(1, DType::Bool), carried);
    go = again->element(0) != 0;
    for (size_t k = 0; k < carried.size(); ++k) carried[k] = out[1 + k];
    if (scans.empty()) scans.resize(out.size() - 1 - carried.size());
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(out[1 + carried.size() + k]);
  }
  for (size_t k = 0; k < carried.size(); ++k) n.set_output(k, carried[k]);
  for (size_t k = carried.size(); k < n.num_outputs(); ++k) {
    if (scans.empty() || scans[k - carried.size()].empty())
      n.unsupported("a Loop that runs no iteration with scan outputs");
    n.set_output(k, stack(n, scans[k - carried.size()], 0));
  }
}

// A Scan over a symbolic sequence length, as one while_loop. Operands: carried (the step t, the
// states, each scan output so far), then the scan inputs, the length, the positions 0..length-1
// and the enclosing values the body reads. Each iteration reads its element of every scan input
// with index_select, and writes each scan output's element at its position with where (a pass
// over the whole output per step). The scan outputs' element types come from a first import.
void scan_on_device(N& n, const std::vector<Value*>& states, const std::vector<Value*>& scans,
                    const std::vector<int64_t>& axes, const std::vector<int64_t>& in_dirs, const SymInt& length) {
  for (size_t i = 1; i < scans.size(); ++i)
    if (!(scans[i]->type.shape[size_t(axes[i])] == length))
      n.unsupported("scan inputs of lengths " + length.str() + " and " + scans[i]->type.shape[size_t(axes[i])].str());
  std::vector<TensorType> formal;
  for (Value* s : states) formal.push_back(s->type);
  for (size_t i = 0; i < scans.size(); ++i) {
    TensorType t = scans[i]->type;
    t.shape.erase(t.shape.begin() + axes[i]);
    formal.push_back(t);
  }
  const NodeContext::Subgraph first = n.import_subgraph_as_graph("body", formal, std::vector<TensorType>{});
  const Graph& probe = *first.graph;
  if (probe.outputs().size() < states.size()) n.fail("the body gives fewer outputs than the states");
  const size_t out_count = probe.outputs().size() - states.size();
  const std::vector<int64_t> out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(out_count, 0));
  const std::vector<int64_t> out_dirs = n.attr_ints("scan_output_directions", std::vector<int64_t>(out_count, 0));
  if (out_axes.size() != out_count || out_dirs.size() != out_count)
    n.fail("scan_output_axes and scan_output_directions need one entry per scan output (" +
           std::to_string(out_count) + "), have " + std::to_string(out_axes.size()) + " and " +
           std::to_string(out_dirs.size()));

  std::vector<Value*> operands = {scalar_i64(n, 0)};
  operands.insert(operands.end(), states.begin(), states.end());
  std::vector<int64_t> stack_axes;
  for (size_t k = 0; k < out_count; ++k) {
    const TensorType& e = probe.outputs()[states.size() + k]->type;
    const int64_t rank = int64_t(e.rank()) + 1;
    stack_axes.push_back(normalize_axis_or(n, out_axes[k], rank));
    Shape whole = e.shape;
    whole.insert(whole.begin() + stack_axes[k], length);
    operands.push_back(n.emit(OpKind::Expand, {n.scalar(0, e.dtype)}, {{"shape", whole}}));
  }
  const size_t carried = operands.size();
  operands.insert(operands.end(), scans.begin(), scans.end());
  operands.push_back(n.shape_value({DType::I64, true, {length}}));
  operands.push_back(n.emit(OpKind::Arange, {}, {{"count", Shape{length}}}));
  const size_t at_length = carried + scans.size(), at_positions = at_length + 1;
  std::vector<TensorType> leading;
  for (Value* v : operands) leading.push_back(v->type);

  NodeContext::Subgraph body = n.import_subgraph_as_graph("body", leading, [&](N& b, const std::vector<Value*>& in) {
    std::vector<Value*> formal_values(in.begin() + 1, in.begin() + 1 + long(states.size()));
    for (size_t i = 0; i < scans.size(); ++i)
      formal_values.push_back(
          element_at(b, in[carried + i], axes[i], step_index(b, in[0], in[at_length], in_dirs[i] != 0)));
    return formal_values;
  });
  Graph& g = *body.graph;
  ImportContext body_values = n.context_for(g);
  N b = n.within(body_values);
  const std::vector<Value*> in = g.inputs();
  const std::vector<Value*> produced = g.outputs();
  std::vector<Value*> results = {b.emit(OpKind::Add, {in[0], scalar_i64(b, 1)})};
  for (size_t k = 0; k < states.size(); ++k) {
    if (!same_type(produced[k]->type, states[k]->type))
      n.unsupported("state " + std::to_string(k) + " is " + states[k]->type.str() + " before the body and " +
                    produced[k]->type.str() + " after it; a Scan run as a loop keeps each state's type");
    results.push_back(produced[k]);
  }
  for (size_t k = 0; k < out_count; ++k)
    results.push_back(with_element_at(b, in[1 + states.size() + k], stack_axes[k], in[at_positions],
                                      step_index(b, in[0], in[at_length], out_dirs[k] != 0),
                                      produced[states.size() + k]));
  g.set_outputs(results);

  operands.insert(operands.end(), body.captured.begin(), body.captured.end());
  const LoopPredicate below_length = [&](N& c, const std::vector<Value*>& in) {
    return c.emit(OpKind::Lt, {in[0], in[at_length]});  // t < length
  };
  const std::vector<Value*> out = emit_while_loop(n, operands, carried, body.graph, below_length);
  for (size_t k = 0; k + 1 < carried; ++k) n.set_output(k, out[1 + k]);
}

void map_scan(N& n) {
  if (n.opset() < 9) n.unsupported("Scan before opset 9 (with a batch axis and sequence_lens)");
  const size_t scan_count = size_t(n.attr_int("num_scan_inputs", 0));
  if (scan_count == 0 || scan_count > n.num_inputs()) n.fail("num_scan_inputs is out of range");
  const size_t state_count = n.num_inputs() - scan_count;
  const std::vector<int64_t> in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(scan_count, 0));
  const std::vector<int64_t> in_dirs = n.attr_ints("scan_input_directions", std::vector<int64_t>(scan_count, 0));
  if (in_axes.size() != scan_count || in_dirs.size() != scan_count)
    n.fail("scan_input_axes and scan_input_directions need one entry per scan input (" + std::to_string(scan_count) +
           "), have " + std::to_string(in_axes.size()) + " and " + std::to_string(in_dirs.size()));
  std::vector<Value*> states, scans;
  for (size_t i = 0; i < state_count; ++i) states.push_back(n.input(i));
  for (size_t i = 0; i < scan_count; ++i) scans.push_back(n.input(state_count + i));
  std::vector<int64_t> axes;
  for (size_t i = 0; i < scan_count; ++i)
    axes.push_back(normalize_axis_or(n, in_axes.at(i), int64_t(scans[i]->type.rank())));
  for (size_t i = 0; i < scan_count; ++i)
    if (scans[i]->type.rank() == 0)
      n.fail("scan input " + std::to_string(i) + " is a scalar, it needs an axis");
  const SymInt& length = scans[0]->type.shape[size_t(axes[0])];
  if (!length.is_static()) return scan_on_device(n, states, scans, axes, in_dirs, length);
  check_unroll(n, length.value());
  std::vector<std::vector<Value*>> outs;
  for (int64_t t = 0; t < length.value(); ++t) {
    std::vector<Value*> in = states;
    for (size_t i = 0; i < scan_count; ++i) {
      const int64_t at = in_dirs[i] ? length.value() - 1 - t : t;
      Value* slice = n.emit(OpKind::Slice, {scans[i]}, {{"axes", std::vector<int64_t>{axes[i]}},
                                                        {"starts", std::vector<int64_t>{at}},
                                                        {"ends", std::vector<int64_t>{at + 1}}});
      Shape s = slice->type.shape;
      s.erase(s.begin() + axes[i]);
      in.push_back(n.reshape(slice, s));
    }
    const std::vector<Value*> out = n.import_subgraph("body", in);
    if (out.size() < state_count) n.fail("the body gives fewer outputs than the states");
    for (size_t k = 0; k < state_count; ++k) states[k] = out[k];
    if (outs.empty()) outs.resize(out.size() - state_count);
    for (size_t k = 0; k < outs.size(); ++k) outs[k].push_back(out[state_count + k]);
  }
  const std::vector<int64_t> out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(outs.size(), 0));
  const std::vector<int64_t> out_dirs = n.attr_ints("scan_output_directions", std::vector<int64_t>(outs.size(), 0));
  if (out_axes.size() != outs.size() || out_dirs.size() != outs.size())
    n.fail("scan_output_axes and scan_output_directions need one entry per scan output (" +
           std::to_string(outs.size()) + "), have " + std::to_string(out_axes.size()) + " and " +
           std::to_string(out_dirs.size()));
  for (size_t k = 0; k < state_count; ++k) n.set_output(k, states[k]);
  for (size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].empty()) n.unsupported("a Scan of length 0 with scan outputs");
    std::vector<Value*> parts = outs[k];
    if (out_dirs[k]) std::reverse(parts.begin(), parts.end());
    n.set_output(state_count + k, stack(n, parts, out_axes[k]));
  }
}

}  // namespace

Value* step_index(NodeContext& b, Value* t, Value* length, bool reverse) {
  if (!reverse) return t;
  return b.emit(OpKind::Sub, {b.emit(OpKind::Sub, {length, b.scalar(1, DType::I64)}), t});
}

Value* element_at(NodeContext& b, Value* whole, int64_t axis, Value* at) {
  Value* picked = b.emit(OpKind::IndexSelect, {whole, b.reshape(at, {1})}, {{"dim", axis}});
  Shape s = whole->type.shape;
  s.erase(s.begin() + axis);
  return b.reshape(picked, s);
}

Value* with_element_at(NodeContext& b, Value* whole, int64_t axis, Value* positions, Value* at, Value* element) {
  Shape column(whole->type.rank(), SymInt(1));  // the positions along `axis`
  column[size_t(axis)] = whole->type.shape[size_t(axis)];
  Value* here = b.emit(OpKind::Eq, {b.reshape(positions, column), at});
  Shape one = element->type.shape;
  one.insert(one.begin() + axis, SymInt(1));
  return b.emit(OpKind::Where, {here, b.reshape(element, one), whole});
}

std::vector<Value*> emit_while_loop(NodeContext& n, const std::vector<Value*>& operands, size_t carried,
                                    std::shared_ptr<Graph> body, const LoopPredicate& predicate) {
  auto cond = std::make_shared<Graph>();
  ImportContext cond_values = n.context_for(*cond);
  NodeContext c = n.within(cond_values);
  std::vector<Value*> in;
  for (Value* v : operands) in.push_back(cond->add_input(v->type));
  cond->set_outputs({predicate(c, in)});
  const AttrMap attrs = {{"carried", int64_t(carried)},
                         {"cond", std::shared_ptr<const Graph>(cond)},
                         {"body", std::shared_ptr<const Graph>(std::move(body))}};
  return n.emit_multi(OpKind::WhileLoop, operands, attrs);
}

void register_control_ops(OpTable& t) {
  t["If"] = map_if;
  t["Loop"] = map_loop;
  t["Scan"] = map_scan;
}

}  // namespace kiln::onnx::detail
