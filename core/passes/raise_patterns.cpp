// raise-patterns: rewrites the decompositions exporters emit back into the graph's own ops, so
// fusion sees one node: the ONNX layer norm (mean, sub, pow 2, mean, add eps, sqrt, div; or rsqrt,
// or reciprocal, and mul; then optionally mul weight and add bias) becomes layer_norm, and the
// stable softmax (max, sub, exp, sum, div over one dim) becomes softmax. The new node carries the
// origins of every node it replaces; the replaced nodes are left unread for dce.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <set>

#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {

namespace {

class Raiser {
 public:
  explicit Raiser(Graph& graph) : graph_(graph) {
    outputs_.insert(graph.outputs().begin(), graph.outputs().end());
  }

  PassStats run() {
    for (Node* n : graph_.nodes()) {
      if (claimed_.count(n)) continue;
      if (n->kind == OpKind::Mean) match_layer_norm(*n);
      else if (n->kind == OpKind::ReduceMax) match_softmax(*n);
    }
    // The new nodes were appended after their readers.
    if (rewrites_ > 0) restore_topological_order(graph_);
    return stats_;
  }

 private:
  // The single reader of v when v is an intermediate (not a graph output), else null.
  Node* only_reader(const Value* v) const {
    if (outputs_.count(v)) return nullptr;
    std::vector<Node*> readers = graph_.users(v);
    return readers.size() == 1 ? readers[0] : nullptr;
  }

  static bool is(const Node* n, OpKind kind) { return n && n->kind == kind; }

  // Reduced dims of a keepdim reduction, normalized; empty when it is not one.
  static std::vector<int64_t> kept_dims(const Node& n) {
    if (!n.attrs.get_bool("keepdim")) return {};
    const int64_t rank = int64_t(n.inputs[0]->type.rank());
    std::vector<int64_t> dims = n.attrs.get_ints("dims");
    for (int64_t& d : dims)
      if (d < 0) d += rank;
    std::sort(dims.begin(), dims.end());
    return dims;
  }

  static bool splat_scalar(const Value* v, double* value) {
    const Literal* lit = literal_of(v);
    if (!lit || lit->numel() < 1 || !literal_is_splat(*lit, lit->element(0))) return false;
    *value = lit->element(0);
    if (lit->dtype == DType::F32) {
      // The shortest decimal that is the same float: eps=1e-05, not 9.999999747378752e-06.
      char text[32];
      auto end = std::to_chars(text, text + sizeof text, float(*value)).ptr;
      *value = std::strtod(std::string(text, end).c_str(), nullptr);
    }
    return true;
  }

  // The operand of binary `n` other than `v` (null when v is not an operand, or both are v).
  static Value* other_operand(const Node& n, const Value* v) {
    if (n.inputs.size() != 2) return nullptr;
    if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
    return nullptr;
  }

  void replace(const std::vector<Node*>& matched, Value* result, OpKind kind,
               const std::vector<Value*>& inputs, AttrMap attrs, const char* counter) {
    Provenance provenance;
    for (const Node* n : matched) provenance.merge(n->provenance);
    Node* fused = graph_.add_node(kind, inputs, attrs, provenance);
    if (!same_type(fused->output()->type, result->type)) return;  // left unread for dce
    fused->output()->name = result->name;
    graph_.replace_uses(result, fused->output());
    claimed_.insert(matched.begin(), matched.end());
    ++stats_.counters[counter];
    ++rewrites_;
  }

  // mean(x) -> d = x - mean -> pow(d, 2) | d*d -> mean -> + eps -> sqrt -> d / s
  //                               (or rsqrt -> d * r, or sqrt -> reciprocal -> d * r) [* w] [+ b]
  void match_layer_norm(Node& mean) {
    Value* x = mean.inputs[0];
    const int64_t rank = int64_t(x->type.rank());
    std::vector<int64_t> dims = kept_dims(mean);
    if (dims.empty() || dims.back() != rank - 1) return;
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] != dims[0] + int64_t(i)) return;  // trailing and contiguous: layer_norm's axis
    const int64_t axis = dims[0];

    Node* sub = only_reader(mean.output());
    if (!is(sub, OpKind::Sub) || sub->inputs[0] != x || sub->inputs[1] != mean.output()) return;
    Value* d = sub->output();
    std::vector<Node*> readers = outputs_.count(d) ? std::vector<Node*>{} : graph_.users(d);
    if (readers.size() != 2) return;
    Node* square = nullptr;
    Node* scale = nullptr;  // div(d, s) or mul(d, r)
    for (Node* r : readers) {
      double two = 0;
      bool pow2 = is(r, OpKind::Pow) && r->inputs[0] == d && splat_scalar(r->inputs[1], &two) && two == 2.0;
      bool self_mul = is(r, OpKind::Mul) && r->inputs[0] == d && r->inputs[1] == d;
      if (pow2 || self_mul) square = r;
      else scale = r;
    }
    if (!square || !scale) return;
    Node* var = only_reader(square->output());
    if (!is(var, OpKind::Mean) || kept_dims(*var) != dims) return;
    Node* add_eps = only_reader(var->output());
    double eps = 0;
    if (!is(add_eps, OpKind::Add) || !splat_scalar(other_operand(*add_eps, var->output()), &eps)) return;
    if (!add_eps->output() || !same_type(add_eps->output()->type, var->output()->type)) return;
    Node* root = only_reader(add_eps->output());
    bool via_sqrt = is(root, OpKind::Sqrt) && is(scale, OpKind::Div) && scale->inputs[0] == d &&
                    scale->inputs[1] == root->output();
    bool via_rsqrt =
        is(root, OpKind::Rsqrt) && is(scale, OpKind::Mul) && other_operand(*scale, d) == root->output();
    Node* recip = is(root, OpKind::Sqrt) ? only_reader(root->output()) : nullptr;
    bool via_recip = is(recip, OpKind::Reciprocal) && is(scale, OpKind::Mul) &&
                     other_operand(*scale, d) == recip->output();
    Node* last = via_recip ? recip : root;
    if (!(via_sqrt || via_rsqrt || via_recip) || only_reader(last->output()) != scale) return;
    std::vector<Node*> matched = {&mean, sub, square, var, add_eps, root};
    if (via_recip) matched.push_back(recip);
    matched.push_back(scale);
    std::vector<Value*> inputs = {x};
    Value* result = scale->output();

    // Optional affine with parameters of exactly the normalized shape (what layer_norm takes).
    const Shape normalized(x->type.shape.begin() + axis, x->type.shape.end());
    auto parameter = [&](const Node* n, OpKind kind) -> Value* {
      if (!is(n, kind)) return nullptr;
      Value* p = other_operand(*n, result);
      if (!p || !same_type(p->type, {x->type.dtype, normalized})) return nullptr;
      return same_type(n->output()->type, x->type) ? p : nullptr;
    };
    if (Node* mul = only_reader(result); Value* w = parameter(mul, OpKind::Mul)) {
      inputs.push_back(w);
      matched.push_back(mul);
      result = mul->output();
      if (Node* add = only_reader(result); Value* b = parameter(add, OpKind::Add)) {
        inputs.push_back(b);
        matched.push_back(add);
        result = add->output();
      }
    }
    if (!same_type(result->type, x->type)) return;
    AttrMap attrs;
    attrs.set("axis", axis);
    attrs.set("eps", eps);
    replace(matched, result, OpKind::LayerNorm, inputs, attrs, "layer_norm");
  }

  // m = max(x, d) -> x - m -> exp -> e / sum(e, d), over one dim with keepdim.
  void match_softmax(Node& max) {
    Value* x = max.inputs[0];
    std::vector<int64_t> dims = kept_dims(max);
    if (dims.size() != 1) return;
    Node* sub = only_reader(max.output());
    if (!is(sub, OpKind::Sub) || sub->inputs[0] != x || sub->inputs[1] != max.output()) return;
    Node* exp = only_reader(sub->output());
    if (!is(exp, OpKind::Exp)) return;
    Value* e = exp->output();
    std::vector<Node*> readers = outputs_.count(e) ? std::vector<Node*>{} : graph_.users(e);
    if (readers.size() != 2) return;
    Node* sum = is(readers[0], OpKind::Sum) ? readers[0] : readers[1];
    Node* div = sum == readers[0] ? readers[1] : readers[0];
    if (!is(sum, OpKind::Sum) || kept_dims(*sum) != dims || !is(div, OpKind::Div)) return;
    if (div->inputs[0] != e || div->inputs[1] != sum->output() || only_reader(sum->output()) != div) return;
    if (!same_type(div->output()->type, x->type)) return;
    AttrMap attrs;
    attrs.set("dim", dims[0]);
    replace({&max, sub, exp, sum, div}, div->output(), OpKind::Softmax, {x}, attrs, "softmax");
  }

  Graph& graph_;
  std::set<const Value*> outputs_;
  std::set<const Node*> claimed_;
  PassStats stats_;
  int64_t rewrites_ = 0;
};

}  // namespace

Pass raise_patterns_pass() {
  return {"raise-patterns",
          "rewrite decomposed layer norms (mean, sub, pow, mean, add, sqrt, div[, mul, add]) and "
          "softmaxes (max, sub, exp, sum, div) into layer_norm and softmax",
          [](Graph& graph) { return Raiser(graph).run(); }};
}

}  // namespace kiln
