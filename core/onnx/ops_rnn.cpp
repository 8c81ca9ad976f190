// ONNX recurrent ops (RNN, GRU, LSTM) unrolled over their static sequence into kiln ops: one
// matmul for every step's input projection, then per step a matmul with the recurrence weights,
// split into gates, activations and the state update. Directions forward, reverse and
// bidirectional, both layouts, initial states, LSTM peepholes, clip and input_forget.
#include <algorithm>
#include <cctype>

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

// The recurrent ops' shared frame: operands in [seq, batch, ...] order, per-direction slices.
struct Recurrence {
  N& n;
  int64_t hidden = 0, gates = 0, seq = 0;
  SymInt batch;
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
    const SymInt& s = x->type.shape[0];
    if (!s.is_static()) n.unsupported("a symbolic sequence length (the sequence is unrolled)");
    seq = s.value();
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
    for (int64_t len : n.constant_ints(4, "sequence_lens"))
      if (len != seq)
        n.unsupported("sequence_lens " + std::to_string(len) + " shorter than the sequence (" +
                      std::to_string(seq) + "): variable lengths are not unrolled");
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

  // X W^T (+ bias) for every step: [seq, batch, cols] split into `seq` values of [batch, cols].
  std::vector<Value*> input_projection(Value* w_t, Value* bias) {
    Value* xw = n.emit(OpKind::MatMul, {x, w_t});
    if (bias) xw = n.emit(OpKind::Add, {xw, bias});
    std::vector<Value*> steps = {xw};
    if (seq > 1)
      steps = n.emit_multi(OpKind::Split, {xw},
                           {{"dim", int64_t(0)}, {"sizes", Ints(static_cast<size_t>(seq), 1)}});
    const SymInt cols = xw->type.shape[2];
    for (Value*& s : steps) s = n.reshape(s, {batch, cols});
    return steps;
  }

  Value* clipped(Value* v) {
    return clip > 0 ? n.emit(OpKind::Clip, {v}, {{"min", -clip}, {"max", clip}}) : v;
  }

  std::vector<Value*> split_gates(Value* v, int64_t count) {
    return n.emit_multi(OpKind::Split, {v},
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

  // Outputs: Y from every direction's per-time-step states, Y_h (and Y_c) from the final ones.
  void set_outputs(const std::vector<std::vector<Value*>>& states,
                   const std::vector<std::vector<Value*>>& finals) {
    if (n.has_output(0)) {
      std::vector<Value*> dirs;
      for (const std::vector<Value*>& per_step : states) {
        std::vector<Value*> rows;
        for (Value* h : per_step) rows.push_back(n.reshape(h, {1, 1, batch, hidden}));
        dirs.push_back(concat(rows, 0));
      }
      Value* y = concat(dirs, 1);
      if (batch_first) y = n.emit(OpKind::Permute, {y}, {{"dims", Ints{2, 0, 1, 3}}});
      n.set_output(0, y);
    }
    for (size_t k = 0; k < finals.size(); ++k) {
      if (!n.has_output(k + 1)) continue;
      std::vector<Value*> dirs;
      for (Value* h : finals[k]) dirs.push_back(n.reshape(h, {1, batch, hidden}));
      Value* y = concat(dirs, 0);
      if (batch_first) y = n.emit(OpKind::Permute, {y}, {{"dims", Ints{1, 0, 2}}});
      n.set_output(k + 1, y);
    }
  }

  // Time steps in the order direction d visits them.
  Ints order(size_t d) const {
    Ints t(static_cast<size_t>(seq));
    for (int64_t i = 0; i < seq; ++i) t[size_t(i)] = is_reverse(d) ? seq - 1 - i : i;
    return t;
  }
};

// B of direction d split into its input half and recurrence half, each [gates*hidden].
std::pair<Value*, Value*> biases(Recurrence& r, size_t d) {
  if (!r.n.has_input(3)) return {nullptr, nullptr};
  Value* b = r.direction(r.n.input(3), d);
  const int64_t g = r.gates * r.hidden;
  return {r.columns(b, 0, g), r.columns(b, g, 2 * g)};
}

void map_rnn(N& n) {
  Recurrence r(n, 1);
  const std::vector<Activation> acts = activations(n, {"Tanh"}, r.num_dir);
  std::vector<std::vector<Value*>> states(r.num_dir), finals(1);
  for (size_t d = 0; d < r.num_dir; ++d) {
    auto [wb, rb] = biases(r, d);
    Value* bias = wb ? n.emit(OpKind::Add, {wb, rb}) : nullptr;
    std::vector<Value*> xw = r.input_projection(r.transpose(r.direction(n.input(1), d)), bias);
    Value* r_t = r.transpose(r.direction(n.input(2), d));
    Value* h = r.initial(5, d);
    states[d].assign(size_t(r.seq), nullptr);
    for (int64_t t : r.order(d)) {
      Value* pre = n.emit(OpKind::Add, {xw[size_t(t)], n.emit(OpKind::MatMul, {h, r_t})});
      h = activate(n, acts[d], r.clipped(pre));
      states[d][size_t(t)] = h;
    }
    finals[0].push_back(h);
  }
  r.set_outputs(states, finals);
}

void map_gru(N& n) {
  Recurrence r(n, 3);
  const std::vector<Activation> acts = activations(n, {"Sigmoid", "Tanh"}, r.num_dir);
  const bool linear_before_reset = n.attr_int("linear_before_reset", 0) != 0;
  const int64_t H = r.hidden;
  std::vector<std::vector<Value*>> states(r.num_dir), finals(1);
  for (size_t d = 0; d < r.num_dir; ++d) {
    const Activation& f = acts[2 * d];
    const Activation& g = acts[2 * d + 1];
    auto [wb, rb] = biases(r, d);
    // z and r take both biases at once; h's recurrence bias goes inside the reset product.
    Value* bias = nullptr;
    Value* rb_h = nullptr;
    if (wb) {
      Value* zr = n.emit(OpKind::Add, {r.columns(wb, 0, 2 * H), r.columns(rb, 0, 2 * H)});
      bias = n.emit(OpKind::Concat, {zr, r.columns(wb, 2 * H, 3 * H)}, {{"dim", int64_t(0)}});
      rb_h = r.columns(rb, 2 * H, 3 * H);
    }
    std::vector<Value*> xw = r.input_projection(r.transpose(r.direction(n.input(1), d)), bias);
    Value* rw_t = r.transpose(r.direction(n.input(2), d));  // [H, 3H]
    Value* r_zr = r.columns(rw_t, 0, 2 * H);
    Value* r_h = r.columns(rw_t, 2 * H, 3 * H);
    Value* h = r.initial(5, d);
    states[d].assign(size_t(r.seq), nullptr);
    for (int64_t t : r.order(d)) {
      std::vector<Value*> x_gates = r.split_gates(xw[size_t(t)], 3);
      std::vector<Value*> h_zr = r.split_gates(n.emit(OpKind::MatMul, {h, r_zr}), 2);
      Value* z = activate(n, f, r.clipped(n.emit(OpKind::Add, {x_gates[0], h_zr[0]})));
      Value* reset = activate(n, f, r.clipped(n.emit(OpKind::Add, {x_gates[1], h_zr[1]})));
      Value* rec;
      if (linear_before_reset) {
        rec = n.emit(OpKind::MatMul, {h, r_h});
        if (rb_h) rec = n.emit(OpKind::Add, {rec, rb_h});
        rec = n.emit(OpKind::Mul, {reset, rec});
      } else {
        rec = n.emit(OpKind::MatMul, {n.emit(OpKind::Mul, {reset, h}), r_h});
        if (rb_h) rec = n.emit(OpKind::Add, {rec, rb_h});
      }
      Value* cand = activate(n, g, r.clipped(n.emit(OpKind::Add, {x_gates[2], rec})));
      Value* one_minus_z = n.emit(OpKind::Sub, {n.scalar(1, r.dtype), z});
      h = n.emit(OpKind::Add, {n.emit(OpKind::Mul, {one_minus_z, cand}), n.emit(OpKind::Mul, {z, h})});
      states[d][size_t(t)] = h;
    }
    finals[0].push_back(h);
  }
  r.set_outputs(states, finals);
}

void map_lstm(N& n) {
  Recurrence r(n, 4);
  const std::vector<Activation> acts = activations(n, {"Sigmoid", "Tanh", "Tanh"}, r.num_dir);
  const bool input_forget = n.attr_int("input_forget", 0) != 0;
  const int64_t H = r.hidden;
  std::vector<std::vector<Value*>> states(r.num_dir), finals(2);
  for (size_t d = 0; d < r.num_dir; ++d) {
    const Activation& f = acts[3 * d];
    const Activation& g = acts[3 * d + 1];
    const Activation& h_act = acts[3 * d + 2];
    auto [wb, rb] = biases(r, d);
    Value* bias = wb ? n.emit(OpKind::Add, {wb, rb}) : nullptr;
    std::vector<Value*> xw = r.input_projection(r.transpose(r.direction(n.input(1), d)), bias);
    Value* r_t = r.transpose(r.direction(n.input(2), d));  // [H, 4H], gates i, o, f, c
    Value *p_i = nullptr, *p_o = nullptr, *p_f = nullptr;
    if (n.has_input(7)) {
      Value* p = r.direction(n.input(7), d);  // [3H]: i, o, f
      p_i = r.columns(p, 0, H);
      p_o = r.columns(p, H, 2 * H);
      p_f = r.columns(p, 2 * H, 3 * H);
    }
    Value* h = r.initial(5, d);
    Value* c = r.initial(6, d);
    states[d].assign(size_t(r.seq), nullptr);
    for (int64_t t : r.order(d)) {
      Value* pre = n.emit(OpKind::Add, {xw[size_t(t)], n.emit(OpKind::MatMul, {h, r_t})});
      std::vector<Value*> gate = r.split_gates(pre, 4);
      Value* i_pre = p_i ? n.emit(OpKind::Add, {gate[0], n.emit(OpKind::Mul, {p_i, c})}) : gate[0];
      Value* i = activate(n, f, r.clipped(i_pre));
      Value* forget;
      if (input_forget) {
        forget = n.emit(OpKind::Sub, {n.scalar(1, r.dtype), i});
      } else {
        Value* f_pre = p_f ? n.emit(OpKind::Add, {gate[2], n.emit(OpKind::Mul, {p_f, c})}) : gate[2];
        forget = activate(n, f, r.clipped(f_pre));
      }
      Value* cand = activate(n, g, r.clipped(gate[3]));
      c = n.emit(OpKind::Add, {n.emit(OpKind::Mul, {forget, c}), n.emit(OpKind::Mul, {i, cand})});
      Value* o_pre = p_o ? n.emit(OpKind::Add, {gate[1], n.emit(OpKind::Mul, {p_o, c})}) : gate[1];
      Value* o = activate(n, f, r.clipped(o_pre));
      h = n.emit(OpKind::Mul, {o, activate(n, h_act, c)});
      states[d][size_t(t)] = h;
    }
    finals[0].push_back(h);
    finals[1].push_back(c);
  }
  r.set_outputs(states, finals);
}

}  // namespace

void register_rnn_ops(OpTable& t) {
  t["RNN"] = map_rnn;
  t["GRU"] = map_gru;
  t["LSTM"] = map_lstm;
}

}  // namespace kiln::onnx::detail
