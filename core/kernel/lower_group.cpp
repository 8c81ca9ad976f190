// lower_group: per-node lowerings rebuilt into one kernel. Every member's expression is kept in
// its own iteration space (its output shape): a member read at the linear index of an equal space
// is substituted as is; a member read anywhere else (a view's index map, a broadcast, a reduction's
// loop) has its coordinate leaves re-derived from the offset it is read at. An anchor (reduction,
// matmul, conv) supplies the kernel's loop; its result, which needs the accumulator, is only read
// by epilogue members at their own element.
#include "core/kernel/lower_group.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/ir/fusible_ops.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

std::string ops_text(const std::vector<const Node*>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) s += (i ? "," : "") + std::string(op_name(nodes[i]->kind));
  return "[" + s + "]";
}

std::string group_name(const std::vector<const Node*>& nodes, const TensorType& out) {
  std::string name = "fused";
  if (nodes.size() > 4) name += std::to_string(nodes.size());
  for (size_t i = 0; i < nodes.size() && i < 4; ++i) name += "_" + std::string(op_name(nodes[i]->kind));
  return name + "_" + std::string(dtype_name(out.dtype)) + "_r" + std::to_string(out.rank());
}

bool is_linear_index(const ExprRef& e) { return e->kind == ExprKind::Coord && e->index == -1; }

bool is_one(const SymInt& d) { return d.is_static() && d.value() == 1; }

// For each dim of `from`, the dim of `to` it is when the two list the same dims but for size-1
// ones (-1 for a size-1 dim of `from`); empty when they do not.
std::vector<int> matching_dims(const Shape& from, const Shape& to) {
  std::vector<int> out(from.size(), -1);
  size_t j = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    if (is_one(from[i])) continue;
    while (j < to.size() && is_one(to[j])) ++j;
    if (j == to.size() || !from[i].same_as(to[j])) return {};
    out[i] = int(j++);
  }
  while (j < to.size() && is_one(to[j])) ++j;
  if (j != to.size()) return {};
  return out;
}

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_as(b[i])) return false;
  return true;
}

// e's origins plus `more`, sorted and unique; e itself when nothing is added.
ExprRef add_origins(const ExprRef& e, const std::vector<int>& more) {
  std::set<int> all(e->origins.begin(), e->origins.end());
  size_t before = all.size();
  all.insert(more.begin(), more.end());
  if (all.size() == before) return e;
  return with_origins(e, std::vector<int>(all.begin(), all.end()));
}

// Members already rebuilt: their expression over their own space.
struct Member {
  ExprRef value;
  Shape space;
  bool accumulates = false;  // the anchor's result: reads the accumulator, valid at its own element only
};

// Rebuilds expressions of per-node kernels inside one KernelBuilder.
class Composer {
 public:
  Composer(KernelBuilder& builder, const Shape& space) : b_(builder) {
    for (size_t d = 0; d < space.size(); ++d) params_[space[d].str()] = param(int(d));
  }

  // A builder param holding `value`, shared by every expression that needs the same value.
  ExprRef param_of(const SymInt& value) {
    auto it = params_.find(value.str());
    if (it != params_.end()) return it->second;
    return params_[value.str()] = b_.param_for(value);
  }

  int external_slot(const Value* v) {
    auto it = slots_.find(v);
    if (it != slots_.end()) return it->second;
    inputs_.push_back(v);
    return slots_[v] = b_.add_buffer(v->type.dtype, false);
  }

  // e from `source` (one node's kernel over `space`), with slot s reading `slot_values[s]`.
  // Loads of members are replaced by the members' expressions.
  ExprRef translate(const ExprRef& e, const LoweredKernel& source, const std::vector<const Value*>& slot_values,
                    const std::map<const Value*, Member>& members, const Shape& space) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    ExprRef out;
    switch (e->kind) {
      case ExprKind::Param:
        out = param_of(source.params.at(size_t(e->index)));
        break;
      case ExprKind::Load: {
        const Value* v = slot_values.at(size_t(e->index));
        ExprRef offset = translate(e->args[0], source, slot_values, members, space);
        auto member = members.find(v);
        if (member == members.end()) {
          out = load(external_slot(v), e->type, offset);
          if (!e->origins.empty()) out = with_origins(out, e->origins);
        } else {
          const Member& m = member->second;
          if (is_linear_index(e->args[0]) && same_shape(m.space, space)) {
            out = m.value;
          } else if (m.accumulates) {
            throw Error("the anchor's result %" + std::to_string(v->id) +
                        " is read at another element than its own; only pointwise consumers of its "
                        "shape fuse into its epilogue");
          } else {
            out = rebase(m.value, offset, m.space, space);
          }
          // A view's kernel is just this load: its origin lives on the load node.
          out = add_origins(out, e->origins);
        }
        break;
      }
      case ExprKind::Op: {
        Expr copy = *e;
        for (ExprRef& a : copy.args) a = translate(a, source, slot_values, members, space);
        out = std::make_shared<const Expr>(std::move(copy));
        break;
      }
      default:  // Const, Coord, ReductionIndex, Accumulator mean the same in the fused kernel
        out = e;
    }
    memo_[e.get()] = out;
    return out;
  }

  // `e` computed over `space` (its Coord leaves index that space) evaluated at row-major `offset`
  // of `target` (the reader's space). Where the offset is the reader's own linear index and the two
  // spaces differ only in size-1 dims (a reshape that adds or drops them), each coordinate is the
  // reader's along the matching dim, not a division of the offset: a C++ kernel then walks rows and
  // reads a view at unit stride, which vectorizes.
  ExprRef rebase(const ExprRef& e, const ExprRef& offset, const Shape& space, const Shape& target) {
    const std::vector<int> matching = is_linear_index(offset) ? matching_dims(space, target) : std::vector<int>{};
    std::map<const Expr*, ExprRef> memo;
    std::function<ExprRef(const ExprRef&)> walk = [&](const ExprRef& x) -> ExprRef {
      auto it = memo.find(x.get());
      if (it != memo.end()) return it->second;
      ExprRef out = x;
      if (x->kind == ExprKind::Coord) {
        if (x->index < 0) {
          out = offset;
        } else if (!matching.empty()) {
          const int d = matching[size_t(x->index)];
          out = d >= 0 ? coord(d) : constant(0, DType::I32);
        } else {
          SymInt stride = 1;
          for (size_t d = size_t(x->index) + 1; d < space.size(); ++d) stride = stride * space[d];
          out = idiv(offset, param_of(stride));
          if (x->index > 0) out = imod(out, param_of(space[size_t(x->index)]));
        }
      } else if (!x->args.empty()) {
        Expr copy = *x;
        for (ExprRef& a : copy.args) a = walk(a);
        out = std::make_shared<const Expr>(std::move(copy));
      }
      return memo[x.get()] = out;
    };
    return walk(e);
  }

  const std::vector<const Value*>& inputs() const { return inputs_; }

 private:
  KernelBuilder& b_;
  std::map<std::string, ExprRef> params_;
  std::map<const Value*, int> slots_;
  std::vector<const Value*> inputs_;
  std::map<const Expr*, ExprRef> memo_;  // source expressions stay alive for the whole lowering
};

std::vector<TensorType> types_of(const std::vector<Value*>& values) {
  std::vector<TensorType> out;
  for (const Value* v : values) out.push_back(v->type);
  return out;
}

LoweredOp lower_node(const Node* n) {
  return lower_op(n->kind, n->attrs, types_of(n->inputs), types_of(n->outputs), n->id);
}

// The value each kernel slot of a single-step lowering reads or writes.
std::vector<const Value*> slot_values(const Node* n, const LoweredOp::Step& step) {
  std::vector<const Value*> out;
  for (int a : step.args) {
    size_t i = size_t(a);
    if (i < n->inputs.size()) out.push_back(n->inputs[i]);
    else if (i < n->inputs.size() + n->outputs.size()) out.push_back(n->outputs[i - n->inputs.size()]);
    else out.push_back(nullptr);  // a temp: only multi-step lowerings have them
  }
  return out;
}

}  // namespace

LoweredGroup lower_group(const std::vector<const Node*>& nodes, const std::vector<const Value*>& outputs) {
  if (nodes.empty()) throw Error("lower_group: empty group");
  LoweredGroup group;
  if (nodes.size() == 1) {
    const Node* n = nodes[0];
    group.op = lower_node(n);
    group.inputs.assign(n->inputs.begin(), n->inputs.end());
    group.outputs.assign(n->outputs.begin(), n->outputs.end());
    return group;
  }

  auto fail = [&](const std::string& why) { return Error("lower_group " + ops_text(nodes) + ": " + why); };
  auto node_text = [](const Node* n) {
    return "node %" + std::to_string(n->id) + " (" + std::string(op_name(n->kind)) + ")";
  };
  // The form fusion.h builds: [pointwise and views] [anchor [pointwise epilogue]].
  size_t anchor = nodes.size();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    if (is_elementwise(*n)) continue;
    if (is_index_view(*n)) {
      if (anchor < nodes.size())
        throw fail(node_text(n) + " is a view after the group's anchor; only pointwise consumers fuse "
                   "into an epilogue");
      continue;
    }
    if (!is_epilogue_anchor(*n) || anchor < nodes.size())
      throw fail(node_text(n) + " is not pointwise; only pointwise chains with views, a reduction of "
                 "them, and pointwise consumers of one reduction/matmul/conv fuse");
    // A template's group reads views of its operands in place (FusionOptions::template_views):
    // its generic kernel reads them through their index maps.
    const bool views_before =
        std::all_of(nodes.begin(), nodes.begin() + long(i), [](const Node* v) { return is_index_view(*v); });
    if (i > 0 && !is_plain_reduction(*n) && !views_before)
      throw fail(node_text(n) + " is not pointwise and does not fuse the nodes before it; only a "
                 "sum/mean/max/min/prod reduction does, or an anchor reading views");
    anchor = i;
  }
  const bool anchored = anchor < nodes.size();
  const Node* last = nodes.back();
  const Shape& space = last->output()->type.shape;
  const TensorType& out_type = last->output()->type;
  KernelBuilder b(group_name(nodes, out_type), anchored ? KernelKind::Reduce : KernelKind::Pointwise, space);
  Composer composer(b, space);
  std::vector<LoweredOp> lowered;  // kept alive: the composer memoizes by expression address
  std::map<const Value*, Member> members;

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    lowered.push_back(lower_node(n));
    const LoweredOp& lo = lowered.back();
    if (lo.steps.size() != 1 || !lo.temps.empty() || lo.steps[0].kernel.kernel.stores.size() != 1)
      throw fail(std::string(op_name(n->kind)) + " lowers to more than one kernel");
    const LoweredKernel& k = lo.steps[0].kernel;
    std::vector<const Value*> slots = slot_values(n, lo.steps[0]);
    const Shape& own = n->output()->type.shape;
    try {
      if (i != anchor) {
        if (k.kernel.kind != KernelKind::Pointwise) throw fail("expected a pointwise kernel for " + node_text(n));
        if (anchored && i > anchor && !same_shape(own, space))
          throw fail("epilogue member shapes differ: " + n->output()->type.str() + " vs " + shape_str(space));
        members[n->output()] = {composer.translate(k.kernel.stores[0].value, k, slots, members, own), own, false};
        continue;
      }
      if (k.kernel.kind != KernelKind::Reduce) throw fail("expected a reduce kernel for " + node_text(n));
      Kernel& fused = b.kernel();
      fused.specialized = fused.specialized || k.kernel.specialized;
      fused.combiner = k.kernel.combiner;
      fused.accumulator_type = k.kernel.accumulator_type;
      fused.extent = composer.translate(k.kernel.extent, k, slots, members, own);
      fused.body = composer.translate(k.kernel.body, k, slots, members, own);
      members[n->output()] = {composer.translate(k.kernel.stores[0].value, k, slots, members, own), own, true};
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.rfind("lower_group ", 0) == 0) throw;
      throw fail(what);
    }
  }

  group.inputs = composer.inputs();
  for (const Value* v : outputs) {
    auto it = members.find(v);
    if (it == members.end()) throw fail("output %" + std::to_string(v->id) + " is not computed by the group");
    const Member& m = it->second;
    if (anchored && v->producer && std::find(nodes.begin(), nodes.begin() + long(anchor), v->producer) !=
                                       nodes.begin() + long(anchor))
      throw fail("a fused reduction cannot also store its producers' values");
    ExprRef value = m.value;
    if (!same_shape(m.space, space)) {
      // Same element count: element i of v is v's expression at its own row-major index i.
      if (!numel(m.space).same_as(numel(space)))
        throw fail("output %" + std::to_string(v->id) + " " + v->type.str() + " has another element count than "
                   "the kernel's space " + shape_str(space));
      value = composer.rebase(value, linear_index(), m.space, space);
    }
    int slot = b.add_buffer(v->type.dtype, true);
    b.kernel().stores.push_back({slot, value});
    group.outputs.push_back(v);
  }
  // An output of another shape than the kernel's space rebuilt its member's tree (rebase), and so
  // did every member read through a view: equal nodes are computed once.
  ExprSharing share;
  for (Store& s : b.kernel().stores) s.value = share(s.value);
  LoweredOp::Step step{b.finish(), {}};
  for (size_t i = 0; i < group.inputs.size() + group.outputs.size(); ++i) step.args.push_back(int(i));
  group.op.steps.push_back(std::move(step));
  return group;
}

}  // namespace kiln::kernel
