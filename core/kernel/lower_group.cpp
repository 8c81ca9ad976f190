// lower_group: per-node lowerings rebuilt into one kernel. Pointwise members share the group's
// iteration space, so a load of a member at the linear index is that member's expression; a fused
// reduction loads its input at an arbitrary offset, so the producers' index leaves are re-derived
// from that offset.
#include "core/kernel/lower_group.h"

#include <functional>
#include <map>
#include <set>

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

  // e from `source` (one node's kernel), with slot s reading `slot_values[s]`. Members in
  // `computed` are substituted; a member read at anything but the linear index needs `rebase`.
  ExprRef translate(const ExprRef& e, const LoweredKernel& source, const std::vector<const Value*>& slot_values,
                    const std::map<const Value*, ExprRef>& computed, const std::map<const Value*, Shape>& spaces) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    ExprRef out;
    switch (e->kind) {
      case ExprKind::Param:
        out = param_of(source.params.at(size_t(e->index)));
        break;
      case ExprKind::Load: {
        const Value* v = slot_values.at(size_t(e->index));
        ExprRef offset = translate(e->args[0], source, slot_values, computed, spaces);
        auto member = computed.find(v);
        if (member == computed.end()) {
          out = load(external_slot(v), e->type, offset);
        } else if (is_linear_index(e->args[0])) {
          out = member->second;
        } else {
          out = rebase(member->second, offset, spaces.at(v));
        }
        break;
      }
      case ExprKind::Op: {
        Expr copy = *e;
        for (ExprRef& a : copy.args) a = translate(a, source, slot_values, computed, spaces);
        out = std::make_shared<const Expr>(std::move(copy));
        break;
      }
      default:  // Const, Coord, ReductionIndex, Accumulator mean the same in the fused kernel
        out = e;
    }
    memo_[e.get()] = out;
    return out;
  }

  const std::vector<const Value*>& inputs() const { return inputs_; }

 private:
  // `e` computed over `space` (its Coord leaves index that space) evaluated at row-major `offset`.
  ExprRef rebase(const ExprRef& e, const ExprRef& offset, const Shape& space) {
    std::map<const Expr*, ExprRef> memo;
    std::function<ExprRef(const ExprRef&)> walk = [&](const ExprRef& x) -> ExprRef {
      auto it = memo.find(x.get());
      if (it != memo.end()) return it->second;
      ExprRef out = x;
      if (x->kind == ExprKind::Coord) {
        if (x->index < 0) {
          out = offset;
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

  const Node* last = nodes.back();
  bool reduce = op_def(last->kind).family == OpFamily::Reduce;
  const Shape& space = reduce ? last->inputs[0]->type.shape : last->output()->type.shape;
  const TensorType& out_type = last->output()->type;
  KernelBuilder b(group_name(nodes, out_type), reduce ? KernelKind::Reduce : KernelKind::Pointwise,
                  out_type.shape);
  Composer composer(b, out_type.shape);
  std::vector<LoweredOp> lowered;  // kept alive: the composer memoizes by expression address
  std::map<const Value*, ExprRef> computed;
  std::map<const Value*, Shape> spaces;
  auto fail = [&](const std::string& why) {
    return Error("lower_group " + ops_text(nodes) + ": " + why);
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    bool is_reduction = reduce && i + 1 == nodes.size();
    if (!is_reduction && op_def(n->kind).family != OpFamily::Unary && op_def(n->kind).family != OpFamily::Binary)
      throw fail("node %" + std::to_string(n->id) + " (" + std::string(op_name(n->kind)) +
                 ") is not pointwise; only pointwise chains and a final reduction fuse");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    bool is_reduction = reduce && i + 1 == nodes.size();
    lowered.push_back(lower_node(n));
    const LoweredOp& lo = lowered.back();
    if (lo.steps.size() != 1 || !lo.temps.empty() || lo.steps[0].kernel.kernel.stores.size() != 1)
      throw fail(std::string(op_name(n->kind)) + " lowers to more than one kernel");
    const LoweredKernel& k = lo.steps[0].kernel;
    std::vector<const Value*> slots = slot_values(n, lo.steps[0]);
    if (!is_reduction) {
      if (!(k.kernel.kind == KernelKind::Pointwise)) throw fail("expected a pointwise kernel");
      for (size_t d = 0; d < space.size(); ++d)
        if (n->output()->type.shape.size() != space.size() || !n->output()->type.shape[d].same_as(space[d]))
          throw fail("member shapes differ: " + n->output()->type.str() + " vs " + shape_str(space));
      computed[n->output()] = composer.translate(k.kernel.stores[0].value, k, slots, computed, spaces);
      spaces[n->output()] = space;
      continue;
    }
    if (k.kernel.kind != KernelKind::Reduce) throw fail("expected a reduce kernel");
    Kernel& fused = b.kernel();
    fused.combiner = k.kernel.combiner;
    fused.accumulator_type = k.kernel.accumulator_type;
    fused.extent = composer.translate(k.kernel.extent, k, slots, computed, spaces);
    fused.body = composer.translate(k.kernel.body, k, slots, computed, spaces);
    computed[n->output()] = composer.translate(k.kernel.stores[0].value, k, slots, computed, spaces);
  }

  group.inputs = composer.inputs();
  for (const Value* v : outputs) {
    auto it = computed.find(v);
    if (it == computed.end()) throw fail("output %" + std::to_string(v->id) + " is not computed by the group");
    if (reduce && v != last->output())
      throw fail("a fused reduction cannot also store its producers' values");
    int slot = b.add_buffer(v->type.dtype, true);
    b.kernel().stores.push_back({slot, it->second});
    group.outputs.push_back(v);
  }
  LoweredOp::Step step{b.finish(), {}};
  for (size_t i = 0; i < group.inputs.size() + group.outputs.size(); ++i) step.args.push_back(int(i));
  group.op.steps.push_back(std::move(step));
  return group;
}

}  // namespace kiln::kernel
