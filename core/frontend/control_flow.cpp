// kiln::cond: one branch eagerly; traced, both branches and a select per output. kiln::while_loop:
// a host loop.
#include "core/frontend/control_flow.h"

#include "core/frontend/ops.h"
#include "core/frontend/scope.h"
#include "core/support/error.h"

namespace kiln {
namespace {

std::string types_text(const std::vector<Tensor>& ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].type().str();
  return s + ")";
}

std::string scoped(const std::string& branch) {
  const std::string& outer = current_scope();
  return outer.empty() ? branch : outer + "." + branch;
}

std::vector<Tensor> run_branch(const BranchFn& fn, const std::vector<Tensor>& operands,
                               const std::string& name) {
  ScopeGuard scope(scoped(name));
  return fn(operands);
}

void check_predicate(const Tensor& pred, const std::string& what, const Loc& loc) {
  if (!pred.defined() || pred.dtype() != DType::Bool || pred.numel() != 1)
    throw Error(what + " at " + short_location(loc) + ": the predicate must be a one-element bool " +
                "tensor, got " + (pred.defined() ? pred.type().str() : std::string("an undefined tensor")));
}

}  // namespace

std::vector<Tensor> cond(const Tensor& pred, const BranchFn& then_fn, const BranchFn& else_fn,
                         const std::vector<Tensor>& operands, Loc loc) {
  auto fail = [&](const std::string& why) {
    throw Error("kiln::cond at " + short_location(loc) + ": " + why);
  };
  check_predicate(pred, "kiln::cond", loc);
  if (!pred.is_traced()) return pred.item<bool>(loc) ? then_fn(operands) : else_fn(operands);

  const std::vector<Tensor> a = run_branch(then_fn, operands, "cond.then");
  const std::vector<Tensor> b = run_branch(else_fn, operands, "cond.else");
  const std::string both = "then_fn returned " + types_text(a) + ", else_fn " + types_text(b);
  if (a.size() != b.size()) fail("the branches return different numbers of tensors: " + both);
  const Tensor flag = pred.dim() == 0 ? pred : reshape(pred, Shape{}, loc);
  std::vector<Tensor> out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined() || !b[i].defined()) fail("output " + std::to_string(i) + " is undefined: " + both);
    const TensorType ta = a[i].type(), tb = b[i].type();
    bool same = ta.dtype == tb.dtype && ta.rank() == tb.rank();
    for (size_t d = 0; same && d < ta.rank(); ++d) same = ta.shape[d] == tb.shape[d];
    if (!same) fail("output " + std::to_string(i) + " differs between the branches: " + both);
    out.push_back(where(flag, a[i], b[i], loc));
  }
  return out;
}

std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const BranchFn& body_fn,
                               std::vector<Tensor> carried, Loc loc) {
  for (;;) {
    const Tensor pred = cond_fn(carried);
    check_predicate(pred, "kiln::while_loop", loc);
    if (!pred.item<bool>(loc)) return carried;
    std::vector<Tensor> next = body_fn(carried);
    bool same = next.size() == carried.size();
    for (size_t i = 0; same && i < next.size(); ++i) {
      same = next[i].defined() && next[i].dtype() == carried[i].dtype() && next[i].dim() == carried[i].dim();
      for (int64_t d = 0; same && d < next[i].dim(); ++d) same = next[i].shape(d) == carried[i].shape(d);
    }
    if (!same)
      throw Error("kiln::while_loop at " + short_location(loc) + ": body_fn took " + types_text(carried) +
                  " and returned " + types_text(next) + "; it must keep each value's dtype and shape");
    carried = std::move(next);
  }
}

}  // namespace kiln
