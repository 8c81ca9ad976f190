// simplify: algebraic identities that remove work without changing any result's type or value:
// x+0, 0+x, x-0, x*1, 1*x, x/1 (the constant has x's dtype and does not broadcast x's shape),
// neg(neg(x)), relu(relu(x)), cast to x's own dtype, reshape to x's own shape, identity permutes,
// and reshape/permute chains collapsed into one node. Provenance is never dropped: a node that
// disappears hands its origins to the node that now computes its result.
#include <algorithm>
#include <set>
#include <string>

#include "core/passes/graph_edit.h"
#include "core/passes/passes.h"

namespace kiln {

namespace {

class Simplifier {
 public:
  explicit Simplifier(Graph& graph) : graph_(graph) {}

  PassStats run() {
    // A rewrite can expose another (neg(neg(neg(neg(x))))); walking in order catches most, and a
    // few extra walks catch the rest.
    for (int round = 0; round < 8; ++round) {
      int64_t before = total_;
      for (Node* n : graph_.nodes()) simplify(*n);
      if (total_ == before) break;
    }
    stats_.counters["rewrites"] = total_;
    return stats_;
  }

 private:
  void simplify(Node& n) {
    if (n.outputs.size() != 1 || dead_.count(&n)) return;
    Value* out = n.outputs[0];
    switch (n.kind) {
      case OpKind::Add:
        if (identity_operand(n, 1, 0.0)) return forward(n, n.inputs[0], "add_zero");
        if (identity_operand(n, 0, 0.0)) return forward(n, n.inputs[1], "add_zero");
        return;
      case OpKind::Sub:
        if (identity_operand(n, 1, 0.0)) return forward(n, n.inputs[0], "sub_zero");
        return;
      case OpKind::Mul:
        if (identity_operand(n, 1, 1.0)) return forward(n, n.inputs[0], "mul_one");
        if (identity_operand(n, 0, 1.0)) return forward(n, n.inputs[1], "mul_one");
        return;
      case OpKind::Div:
        if (identity_operand(n, 1, 1.0)) return forward(n, n.inputs[0], "div_one");
        return;
      case OpKind::Neg:
        if (Node* inner = producer_of_kind(n.inputs[0], OpKind::Neg))
          return forward_through(n, *inner, inner->inputs[0], "neg_neg");
        return;
      case OpKind::Relu:
        // relu is idempotent: readers of the outer one read the inner one.
        if (producer_of_kind(n.inputs[0], OpKind::Relu)) return forward(n, n.inputs[0], "relu_relu");
        return;
      case OpKind::Cast:
        if (n.inputs[0]->type.dtype == n.attrs.get_dtype("dtype")) forward(n, n.inputs[0], "cast_same");
        return;
      case OpKind::Reshape:
        if (Node* inner = producer_of_kind(n.inputs[0], OpKind::Reshape)) {
          // The outer reshape's target depends only on the element count, which the inner keeps.
          absorb(n, *inner);
          count("reshape_reshape");
        }
        if (same_type(n.inputs[0]->type, out->type)) forward(n, n.inputs[0], "reshape_same");
        return;
      case OpKind::Permute: {
        const int64_t rank = int64_t(out->type.rank());
        std::vector<int64_t> dims = normalized(n.attrs.get_ints("dims"), rank);
        if (Node* inner = producer_of_kind(n.inputs[0], OpKind::Permute)) {
          // out[i] = mid[dims[i]] = x[inner_dims[dims[i]]]
          std::vector<int64_t> inner_dims = normalized(inner->attrs.get_ints("dims"), rank);
          std::vector<int64_t> composed(static_cast<size_t>(rank));
          for (int64_t i = 0; i < rank; ++i) composed[size_t(i)] = inner_dims[size_t(dims[size_t(i)])];
          n.attrs.set("dims", composed);
          dims = composed;
          absorb(n, *inner);
          count("permute_permute");
        }
        bool identity = true;
        for (int64_t i = 0; i < rank; ++i) identity = identity && dims[size_t(i)] == i;
        if (identity && same_type(n.inputs[0]->type, out->type)) forward(n, n.inputs[0], "permute_identity");
        return;
      }
      default:
        return;
    }
  }

  // Operand `which` of a binary node is a constant splat of `value`, with the other operand's
  // dtype, and the other operand already has the result's type (so no broadcast or promotion).
  bool identity_operand(const Node& n, size_t which, double value) const {
    const Literal* lit = literal_of(n.inputs[which]);
    const Value* other = n.inputs[1 - which];
    return lit && lit->dtype == other->type.dtype && same_type(other->type, n.outputs[0]->type) &&
           literal_is_splat(*lit, value);
  }

  static Node* producer_of_kind(const Value* v, OpKind kind) {
    return v->producer && v->producer->kind == kind ? v->producer : nullptr;
  }

  static std::vector<int64_t> normalized(std::vector<int64_t> dims, int64_t rank) {
    for (int64_t& d : dims)
      if (d < 0) d += rank;
    return dims;
  }

  // n now reads inner's input directly and computes inner's part too, so it takes inner's origins.
  void absorb(Node& n, const Node& inner) {
    n.inputs[0] = inner.inputs[0];
    n.provenance.merge(inner.provenance);
  }

  // Readers of n's result read `to` instead; n's origins go to the node that computes `to`.
  void forward(Node& n, Value* to, const char* rule) {
    if (!same_type(to->type, n.outputs[0]->type) || to == n.outputs[0]) return;
    if (to->producer) to->producer->provenance.merge(n.provenance);
    graph_.replace_uses(n.outputs[0], to);
    if (to->name.empty()) to->name = n.outputs[0]->name;
    dead_.insert(&n);  // left unread for dce; later walks skip it
    count(rule);
  }

  // f(f(x)) == x: both nodes vanish when the inner one has no other reader.
  void forward_through(Node& n, const Node& inner, Value* to, const char* rule) {
    if (to->producer && only_live_reader_is(inner.outputs[0], &n))
      to->producer->provenance.merge(inner.provenance);
    forward(n, to, rule);
  }

  // Nodes this pass already bypassed still read their inputs until dce runs; they do not count.
  bool only_live_reader_is(const Value* v, const Node* reader) const {
    const auto& outs = graph_.outputs();
    if (std::find(outs.begin(), outs.end(), v) != outs.end()) return false;
    for (const Node* r : graph_.users(v))
      if (r != reader && !dead_.count(r)) return false;
    return true;
  }

  void count(const char* rule) {
    ++stats_.counters[rule];
    ++total_;
  }

  Graph& graph_;
  std::set<const Node*> dead_;
  PassStats stats_;
  int64_t total_ = 0;
};

}  // namespace

Pass simplify_pass() {
  return {"simplify",
          "algebraic identities: x+0, x-0, x*1, x/1, neg(neg(x)), relu(relu(x)), no-op casts, "
          "reshapes and permutes, reshape/permute chains",
          [](Graph& graph) { return Simplifier(graph).run(); }};
}

}  // namespace kiln
