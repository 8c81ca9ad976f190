// ONNX recurrent ops (RNN, GRU, LSTM) as kiln ops: one matmul for every step's input projection,
// then per step a matmul with the recurrence weights, split into gates, activations and the state
// update. A static sequence is unrolled; a symbolic one (a model exported with a dynamic sequence
// axis) runs the step as a while_loop's body. Directions forward, reverse and bidirectional, both
// layouts, initial states, LSTM peepholes, clip and input_forget.
#include <algorithm>
#include <cctype>
#include <functional>

#include "core/onnx/import_context.h"

namespace kiln::onnx::detail {
namespace {

using N = NodeContext;
using Ints = std::vector<int64_t>;

// One gate activation with its alpha/beta (ONNX's activation_alpha/beta lists).
struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The activations for every direction: `per_dir` functions each, defaults when not given.
// alpha/beta entries are consumed in order by the functions that take them.
std::vector<Activation> activations(N& n, const std::vector<std::string>& defaults, size_t num_dir) {
  std::vector<std::string> names = n.attr_strings("activations");
  if (names.empty())
    for (size_t d = 0; d < num_dir; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != defaults.size() * num_dir)
    n.fail("activations needs " + std::to_string(defaults.size() * num_dir) + " names, has " +
           std::to_string(names.size()));
  const std::vector<double> alphas = n.attr_floats("activation_alpha");
  const std::vector<double> betas = n.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  auto next = [](const std::vector<double>& v, size_t& i, double fallback) {
    return i < v.size() ? v[i++] : fallback;
  };
  std::vector<Activation> out;
  for (const std::string& raw : names) {
    Activation a{lower(raw)};
    if (a.name == "leakyrelu") a.alpha = next(alphas, ai, 0.01);
    else if (a.name == "thresholdedrelu" || a.name == "elu") a.alpha = next(alphas, ai, 1.0);
    else if (a.name == "hardsigmoid") {
      a.alpha = next(alphas, ai, 0.2);
      a.beta = next(betas, bi, 0.5);
    } else if (a.name == "affine" || a.name == "scaledtanh") {
      a.alpha = next(alphas, ai, 1.0);
      a.beta = next(betas, bi, a.name == "affine" ? 0.0 : 1.0);
    } else if (a.name != "sigmoid" && a.name != "tanh" && a.name != "relu" &&
               a.name != "softsign" && a.name != "softplus") {
      n.unsupported("activation '" + raw + "'");
    }
    out.push_back(a);
  }
  return out;
}

Value* scalar_like(N& n, double v, Value* like) { return n.scalar(v, like->type.dtype); }

Value* activate(N& n, const Activation& a, Value* x) {
  if (a.name == "sigmoid") return n.emit(OpKind::Sigmoid, {x});
  if (a.name == "tanh") return n.emit(OpKind::Tanh, {x});
  if (a.name == "relu") return n.emit(OpKind::Relu, {x});
  if (a.name == "leakyrelu") return n.emit(OpKind::LeakyRelu, {x}, {{"alpha", a.alpha}});
  if (a.name == "elu") return n.emit(OpKind::Elu, {x}, {{"alpha", a.alpha}});
  if (a.name == "affine")
    return n.emit(OpKind::Add, {n.emit(OpKind::Mul, {x, scalar_like(n, a.alpha, x)}),
                                scalar_like(n, a.beta, x)});
  if (a.name == "scaledtanh") {
    Value* t = n.emit(OpKind::Tanh, {n.emit(OpKind::Mul, {x, scalar_like(n, a.beta, x)})});
    return n.emit(OpKind::Mul, {t, scalar_like(n, a.alpha, x)});
  }
  if (a.name == "hardsigmoid") {
    Value* y = n.emit(OpKind::Add, {n.emit(OpKind::Mul, {x, scalar_like(n, a.alpha, x)}),
                                    scalar_like(n, a.beta, x)});
    return n.emit(OpKind::Clip, {y}, {{"min", 0.0}, {"max", 1.0}});
  }
  if (a.name == "thresholdedrelu") {
    Value* keep = n.emit(OpKind::Gt, {x, scalar_like(n, a.alpha, x)});
    return n.emit(OpKind::Where, {keep, x, scalar_like(n, 0, x)});
  }
  if (a.name == "softsign") {
    Value* d = n.emit(OpKind::Add, {n.emit(OpKind::Abs, {x}), scalar_like(n, 1, x)});
    return n.emit(OpKind::Div, {x, d});
  }
  // softplus: log(1 + exp(x)), as max(x, 0) + log(1 + exp(-|x|)) so large x does not overflow.
  Value* e = n.emit(OpKind::Exp, {n.emit(OpKind::Neg, {n.emit(OpKind::Abs, {x})})});
  Value* l = n.emit(OpKind::Log, {n.emit(OpKind::Add, {e, scalar_like(n, 1, x)})});
  return n.emit(OpKind::Add, {n.emit(OpKind::Relu, {x}), l});
}

// One direction of a recurrence: what its steps read, and the step.
struct Cell {
  Value* xw = nullptr;          // X W^T (+ bias) for every step: [seq, batch, gates*hidden]
  std::vector<Value*> weights;  // what each step reads besides its input and the states; may hold nulls
  std::vector<Value*> states;   // the initial states, each [batch, hidden]: h (and c)
  // One step emitted through `n`: its input [batch, gates*hidden], then the states and the
  // weights as values of n's graph. Returns the next states, h first.
  std::function<std::vector<Value*>(N& n, Value* x, const std::vector<Value*>& states,
                                    const std::vector<Value*>& weights)>
      step;
};

// What one direction gives: its part of Y, [seq, 1, batch, hidden] (null when Y is not an
// output), and its final states.
struct Ran {
  Value* y = nullptr;
  std::vector<Value*> finals;
};

// The recurrent ops' shared frame: operands in [seq, batch, ...] order, per-direction slices.
// A static sequence is unrolled; a symbolic one runs as a while_loop.
struct Recurrence {
  N& n;
  int64_t hidden = 0, gates = 0;
  SymInt seq, batch;
  size_t num_dir = 1;
  bool reverse_only = false;  // direction "reverse"; bidirectional's second one is reverse too
  bool batch_first = false;
  double clip = 0;  // 0: no clip
  Value* x = nullptr;  // [seq, batch, input]
  DType dtype = DType::F32;

  Recurrence(N& node, int64_t num_gates) : n(node), gates(num_gates) {
    const std::string dir = n.attr_string("direction", "forward");
    if (dir == "bidirectional") num_dir = 2;
    else if (dir != "forward" && dir != "reverse") n.fail("unknown direction '" + dir + "'");
    reverse_only = dir == "reverse";
    batch_first = n.attr_int("layout", 0) != 0;
    check_weights();
    hidden = n.attr_int("hidden_size", n.input_type(2).shape[2].value());
    if (hidden != n.input_type(2).shape[2].value())
      n.fail("hidden_size " + std::to_string(hidden) + " does not match R " + n.input_type(2).str());
    if (n.has_attr("clip")) clip = n.attr_float("clip", 0);
    x = n.input(0);
    dtype = x->type.dtype;
    if (!is_floating(dtype)) n.unsupported("element type " + std::string(dtype_name(dtype)));
    if (x->type.rank() != 3) n.fail("X must have rank 3, has " + x->type.str());
    if (batch_first) x = n.emit(OpKind::Permute, {x}, {{"dims", Ints{1, 0, 2}}});
    seq = x->type.shape[0];
    batch = x->type.shape[1];
    check_sequence_lens();
  }

  bool is_reverse(size_t d) const { return reverse_only || d == 1; }

  // W is [num_dir, gates*hidden, input] and R [num_dir, gates*hidden, hidden], with static dims.
  void check_weights() {
    for (int i : {1, 2}) {
      const TensorType& t = n.input_type(size_t(i));
      const char* name = i == 1 ? "W" : "R";
      if (t.rank() != 3 || !is_static(t.shape))
        n.fail(std::string(name) + " must have rank 3 and static dims, has " + t.str());
      if (t.shape[0].value() != int64_t(num_dir))
        n.fail(std::string(name) + " " + t.str() + " has " + t.shape[0].str() + " directions, not " +
               std::to_string(num_dir));
    }
    const TensorType& r = n.input_type(2);
    const int64_t h = r.shape[2].value();
    if (h < 1 || h > (int64_t(1) << 40) || r.shape[1].value() != gates * h ||
        n.input_type(1).shape[1].value() != gates * h)
      n.fail("W " + n.input_type(1).str() + " and R " + r.str() + " do not hold " +
             std::to_string(gates) + " gates of hidden size " + std::to_string(h));
  }

  // Sequences shorter than the input would need per-batch masking; only full lengths import.
  void check_sequence_lens() {
    if (!n.has_input(4)) return;
    if (!seq.is_static()) n.unsupported("sequence_lens with a symbolic sequence length " + seq.str());
    for (int64_t len : n.constant_ints(4, "sequence_lens"))
      if (len != seq.value())
        n.unsupported("sequence_lens " + std::to_string(len) + " shorter than the sequence (" + seq.str() +
                      "): variable lengths are not masked");
  }

  // Direction d of a [num_dir, ...] operand, without its leading dim.
  Value* direction(Value* v, size_t d) {
    Value* s = n.emit(OpKind::Slice, {v},
                      {{"starts", Ints{int64_t(d)}}, {"ends", Ints{int64_t(d) + 1}},
                       {"axes", Ints{0}}, {"steps", Ints{}}});
    Shape shape(s->type.shape.begin() + 1, s->type.shape.end());
    return n.reshape(s, shape);
  }

  Value* transpose(Value* m) { return n.emit(OpKind::Permute, {m}, {{"dims", Ints{1, 0}}}); }

  // Columns [begin, end) of a [rows, cols] value.
  Value* columns(Value* m, int64_t begin, int64_t end) {
    const int64_t last = int64_t(m->type.rank()) - 1;
    return n.emit(OpKind::Slice, {m}, {{"starts", Ints{begin}}, {"ends", Ints{end}},
                                       {"axes", Ints{last}}, {"steps", Ints{}}});
  }

  // Initial state (input i) of direction d as [batch, hidden]; zeros when absent.
  Value* initial(size_t i, size_t d) {
    if (!n.has_input(i)) {
      // Zeros broadcast to the run's batch, or to a batch too large to hold as a constant.
      if (!batch.is_static() || batch.value() > (int64_t(1) << 16) / hidden)
        return n.emit(OpKind::Expand, {n.scalar(0, dtype)}, {{"shape", Shape{batch, hidden}}});
      Literal zeros{dtype, {batch.value(), hidden}, {}};
      zeros.bytes.assign(size_t(zeros.numel()) * dtype_size(dtype), 0);
      return n.constant_value(zeros);
    }
    Value* h = n.input(i);
    if (batch_first) h = n.emit(OpKind::Permute, {h}, {{"dims", Ints{1, 0, 2}}});
    return direction(h, d);
  }

  // X W^T (+ bias) for every step: [seq, batch, cols], one matmul.
  Value* input_projection(Value* w_t, Value* bias) {
    Value* xw = n.emit(OpKind::MatMul, {x, w_t});
    return bias ? n.emit(OpKind::Add, {xw, bias}) : xw;
  }

  // The step's ops go through `b`: the node's context over the graph the step is built in.
  Value* clipped(N& b, Value* v) const {
    return clip > 0 ? b.emit(OpKind::Clip, {v}, {{"min", -clip}, {"max", clip}}) : v;
  }

  std::vector<Value*> split_gates(N& b, Value* v, int64_t count) const {
    return b.emit_multi(OpKind::Split, {v},
                        {{"dim", int64_t(1)}, {"sizes", Ints(static_cast<size_t>(count), hidden)}});
  }

  // Concatenation along `dim` as a tree of at most kConcatFanIn inputs per node: a generated
  // concat kernel binds every input and its offsets, and one over a whole long sequence
  // overflows small push-constant blocks (128 bytes on lavapipe).
  static constexpr size_t kConcatFanIn = 4;
  Value* concat(std::vector<Value*> parts, int64_t dim) {
    while (parts.size() > 1) {
      std::vector<Value*> next;
      for (size_t i = 0; i < parts.size(); i += kConcatFanIn) {
        std::vector<Value*> group(parts.begin() + long(i),
                                  parts.begin() + long(std::min(parts.size(), i + kConcatFanIn)));
        next.push_back(group.size() == 1 ? group[0] : n.emit(OpKind::Concat, group, {{"dim", dim}}));
      }
      parts = std::move(next);
    }
    return parts[0];
  }

  Ran run(const Cell& cell, size_t d) { return seq.is_static() ? unroll(cell, d) : loop(cell, d); }

  // Direction d over a static sequence: the step emitted once per time step.
  Ran unroll(const Cell& cell, size_t d) {
    const int64_t steps = seq.value();
    std::vector<Value*> inputs = {cell.xw};
    if (steps > 1)
      inputs = n.emit_multi(OpKind::Split, {cell.xw},
                            {{"dim", int64_t(0)}, {"sizes", Ints(static_cast<size_t>(steps), 1)}});
    const SymInt cols = cell.xw->type.shape[2];
    std::vector<Value*> rows(static_cast<size_t>(steps), nullptr);
    std::vector<Value*> states = cell.states;
    for (int64_t i = 0; i < steps; ++i) {
      const size_t t = size_t(is_reverse(d) ? steps - 1 - i : i);  // the time step visited i-th
      states = cell.step(n, n.reshape(inputs[t], {batch, cols}), states, cell.weights);
      rows[t] = n.reshape(states[0], {1, 1, batch, hidden});
    }
    Ran out;
    out.finals = states;
    if (n.has_output(0) && steps > 0) out.y = concat(rows, 0);
    return out;
  }

  // Direction d over a symbolic sequence, as one while_loop. Operands: carried (the step count t,
  // the states, and Y's part so far when Y is an output), then X W^T, the sequence length, the
  // time steps 0 .. seq-1, and the weights. Each iteration reads its time step's input and writes
  // its h into Y's part (element_at, with_element_at: a pass over Y per step).
  Ran loop(const Cell& cell, size_t d) {
    const bool want_y = n.has_output(0);
    std::vector<Value*> operands = {n.scalar(0, DType::I64)};
    operands.insert(operands.end(), cell.states.begin(), cell.states.end());
    if (want_y)
      operands.push_back(n.emit(OpKind::Expand, {n.scalar(0, dtype)}, {{"shape", Shape{seq, batch, hidden}}}));
    const size_t carried = operands.size();
    operands.push_back(cell.xw);
    operands.push_back(n.shape_value({DType::I64, true, {seq}}));
    operands.push_back(n.emit(OpKind::Arange, {}, {{"count", Shape{seq}}}));
    for (Value* w : cell.weights)
      if (w) operands.push_back(w);

    auto body = std::make_shared<Graph>();
    ImportContext body_values = n.context_for(*body);
    N b = n.within(body_values);
    std::vector<Value*> in;
    for (Value* v : operands) in.push_back(body->add_input(v->type));
    Value* at = step_index(b, in[0], in[carried + 1], is_reverse(d));  // the time step this iteration visits
    Value* input = element_at(b, in[carried], 0, at);
    std::vector<Value*> weights;
    size_t next_weight = carried + 3;
    for (Value* w : cell.weights) weights.push_back(w ? in[next_weight++] : nullptr);
    const std::vector<Value*> states(in.begin() + 1, in.begin() + 1 + long(cell.states.size()));
    const std::vector<Value*> next = cell.step(b, input, states, weights);
    std::vector<Value*> results = {b.emit(OpKind::Add, {in[0], b.scalar(1, DType::I64)})};
    results.insert(results.end(), next.begin(), next.end());
    if (want_y) results.push_back(with_element_at(b, in[carried - 1], 0, in[carried + 2], at, next[0]));
    body->set_outputs(results);

    const LoopPredicate below_length = [&](N& c, const std::vector<Value*>& cond_in) {
      return c.emit(OpKind::Lt, {cond_in[0], cond_in[carried + 1]});  // t < seq
    };
    const std::vector<Value*> out = emit_while_loop(n, operands, carried, body, below_length);
    Ran ran;
    ran.finals.assign(out.begin() + 1, out.begin() + 1 + long(cell.states.size()));
    if (want_y) ran.y = n.reshape(out[carried - 1], {seq, 1, batch, hidden});
    return ran;
  }

  // Outputs: Y from every direction's part, Y_h (and Y_c) from the final states.
  void set_outputs(const std::vector<Ran>& dirs) {
    if (n.has_output(0)) {
      std::vector<Value*> parts;
      for (const Ran& r : dirs) {
        if (!r.y) n.unsupported("Y of a sequence of length 0");
        parts.push_back(r.y);
      }
      Value* y = concat(parts, 1);
      if (batch_first) y = n.emit(OpKind::Permute, {y}, {{"dims", Ints{2, 0, 1, 3}}});
      n.set_output(0, y);
    }
    for (size_t k = 0; k < dirs[0].finals.size(); ++k) {
      if (!n.has_output(k + 1)) continue;
      std::vector<Value*> parts;
      for (const Ran& r : dirs) parts.push_back(n.reshape(r.finals[k], {1, batch, hidden}));
      Value* y = concat(parts, 0);
      if (batch_first) y = n.emit(OpKind::Permute, {y}, {{"dims", Ints{1, 0, 2}}});
      n.set_output(k + 1, y);
    }
  }
};

// B of direction d split into its input half and recurrence half, each [gates*hidden].
std::pair<Value*, Value*> biases(Recurrence& r, size_t d) {
  if (!r.n.has_input(3)) return {nullptr, nullptr};
  Value* b = r.direction(r.n.input(3), d);
  const int64_t g = r.gates * r.hidden;
  return {r.columns(b, 0, g), r.columns(b, g, 2 * g)};
}

using States = std::vector<Value*>;

void map_rnn(N& n) {
  Recurrence r(n, 1);
  const std::vector<Activation> acts = activations(n, {"Tanh"}, r.num_dir);
  std::vector<Ran> dirs;
  for (size_t d = 0; d < r.num_dir; ++d) {
    auto [wb, rb] = biases(r, d);
    Value* bias = wb ? n.emit(OpKind::Add, {wb, rb}) : nullptr;
    Cell cell;
    cell.xw = r.input_projection(r.transpose(r.direction(n.input(1), d)), bias);
    cell.weights = {r.transpose(r.direction(n.input(2), d))};
    cell.states = {r.initial(5, d)};
    cell.step = [&r, act = acts[d]](N& b, Value* x, const States& s, const States& w) {
      Value* pre = b.emit(OpKind::Add, {x, b.emit(OpKind::MatMul, {s[0], w[0]})});
      return States{activate(b, act, r.clipped(b, pre))};
    };
    dirs.push_back(r.run(cell, d));
  }
  r.set_outputs(dirs);
}

void map_gru(N& n) {
  Recurrence r(n, 3);
  const std::vector<Activation> acts = activations(n, {"Sigmoid", "Tanh"}, r.num_dir);
  const bool linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  const int64_t H = r.hidden;
  std::vector<Ran> dirs;
  for (size_t d = 0; d < r.num_dir; ++d) {
    auto [wb, rb] = biases(r, d);
    // z and r take both biases at once; h's recurrence bias goes inside the reset product.
    Value* bias = nullptr;
    Value* rb_h = nullptr;
    if (wb) {
      Value* zr = n.emit(OpKind::Add, {r.columns(wb, 0, 2 * H), r.columns(rb, 0, 2 * H)});
      bias = n.emit(OpKind::Concat, {zr, r.columns(wb, 2 * H, 3 * H)}, {{"dim", int64_t(0)}});
      rb_h = r.columns(rb, 2 * H, 3 * H);
    }
    Cell cell;
    cell.xw = r.input_projection(r.transpose(r.direction(n.input(1), d)), bias);
    Value* rw_t = r.transpose(r.direction(n.input(2), d));  // [H, 3H]
    cell.weights = {r.columns(rw_t, 0, 2 * H), r.columns(rw_t, 2 * H, 3 * H), rb_h};
    cell.states = {r.initial(5, d)};
    cell.step = [&r, f = acts[2 * d], g = acts[2 * d + 1], linear_before_reset](N& b, Value* x, const States& s,
                                                                                  const States& w) {
      Value* h = s[0];
      Value *r_zr = w[0], *r_h = w[1], *rb_h = w[2];
      std::vector<Value*> x_gates = r.split_gates(b, x, 3);
      std::vector<Value*> h_zr = r.split_gates(b, b.emit(OpKind::MatMul, {h, r_zr}), 2);
      Value* z = activate(b, f, r.clipped(b, b.emit(OpKind::Add, {x_gates[0], h_zr[0]})));
      Value* reset = activate(b, f, r.clipped(b, b.emit(OpKind::Add, {x_gates[1], h_zr[1]})));
      Value* rec;
      if (linear_before_reset) {
        rec = b.emit(OpKind::MatMul, {h, r_h});
        if (rb_h) rec = b.emit(OpKind::Add, {rec, rb_h});
        rec = b.emit(OpKind::Mul, {reset, rec});
      } else {
        rec = b.emit(OpKind::MatMul, {b.emit(OpKind::Mul, {reset, h}), r_h});
        if (rb_h) rec = b.emit(OpKind::Add, {rec, rb_h});
      }
      Value* cand = activate(b, g, r.clipped(b, b.emit(OpKind::Add, {x_gates[2], rec})));
      Value* one_minus_z = b.emit(OpKind::Sub, {b.scalar(1, r.dtype), z});
      return States{b.emit(OpKind::Add, {b.emit(OpKind::Mul, {one_minus_z, cand}), b.emit(OpKind::Mul, {z, h})})};
    };
    dirs.push_back(r.run(cell, d));
  }
  r.set_outputs(dirs);
}

void map_lstm(N& n) {
  Recurrence r(n, 4);
  const std::vector<Activation> acts = activations(n, {"Sigmoid", "Tanh", "Tanh"}, r.num_dir);
  const bool input_forget = n.attr_int("input_forget", 0) != 0;
  const int64_t H = r.hidden;
  std::vector<Ran> dirs;
  for (size_t d = 0; d < r.num_dir; ++d) {
    auto [wb, rb] = biases(r, d);
    Value* bias = wb ? n.emit(OpKind::Add, {wb, rb}) : nullptr;
    Cell cell;
    cell.xw = r.input_projection(r.transpose(r.direction(n.input(1), d)), bias);
    cell.weights = {r.transpose(r.direction(n.input(2), d)), nullptr, nullptr, nullptr};  // [H, 4H]: i, o, f, c
    if (n.has_input(7)) {
      Value* p = r.direction(n.input(7), d);  // peepholes [3H]: i, o, f
      cell.weights = {cell.weights[0], r.columns(p, 0, H), r.columns(p, H, 2 * H), r.columns(p, 2 * H, 3 * H)};
    }
    cell.states = {r.initial(5, d), r.initial(6, d)};
    cell.step = [&r, f = acts[3 * d], g = acts[3 * d + 1], h_act = acts[3 * d + 2], input_forget](
                    N& b, Value* x, const States& s, const States& w) {
      Value *h = s[0], *c = s[1];
      Value *p_i = w[1], *p_o = w[2], *p_f = w[3];
      Value* pre = b.emit(OpKind::Add, {x, b.emit(OpKind::MatMul, {h, w[0]})});
      std::vector<Value*> gate = r.split_gates(b, pre, 4);
      Value* i_pre = p_i ? b.emit(OpKind::Add, {gate[0], b.emit(OpKind::Mul, {p_i, c})}) : gate[0];
      Value* i = activate(b, f, r.clipped(b, i_pre));
      Value* forget;
      if (input_forget) {
        forget = b.emit(OpKind::Sub, {b.scalar(1, r.dtype), i});
      } else {
        Value* f_pre = p_f ? b.emit(OpKind::Add, {gate[2], b.emit(OpKind::Mul, {p_f, c})}) : gate[2];
        forget = activate(b, f, r.clipped(b, f_pre));
      }
      Value* cand = activate(b, g, r.clipped(b, gate[3]));
      c = b.emit(OpKind::Add, {b.emit(OpKind::Mul, {forget, c}), b.emit(OpKind::Mul, {i, cand})});
      Value* o_pre = p_o ? b.emit(OpKind::Add, {gate[1], b.emit(OpKind::Mul, {p_o, c})}) : gate[1];
      Value* o = activate(b, f, r.clipped(b, o_pre));
      return States{b.emit(OpKind::Mul, {o, activate(b, h_act, c)}), c};
    };
    dirs.push_back(r.run(cell, d));
  }
  r.set_outputs(dirs);
}

}  // namespace

void register_rnn_ops(OpTable& t) {
  t["RNN"] = map_rnn;
  t["GRU"] = map_gru;
  t["LSTM"] = map_lstm;
}

}  // namespace kiln::onnx::detail
