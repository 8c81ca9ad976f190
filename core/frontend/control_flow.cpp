// kiln::cond: one branch eagerly; traced, both branches and a select per output. kiln::while_loop:
// a host loop eagerly; traced, one while_loop node whose cond and body are subgraphs.
#include "core/frontend/control_flow.h"

#include "core/frontend/dispatch.h"
#include "core/frontend/lazy.h"
#include "core/frontend/ops.h"
#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"
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

namespace {

// The trace a while_loop called now belongs to: the subgraph being traced (a loop inside a loop),
// else its carried values', else the compiled function's or lazy segment's being traced on this
// thread; null when the loop runs eagerly.
Tracer* enclosing_tracer(const std::vector<Tensor>& carried) {
  Tracer* compiling = compiling_tracer();
  if (compiling && compiling->captures_traced) return compiling;
  for (const Tensor& t : carried)
    if (t.defined() && t.is_traced()) return t.impl().tracer;
  return compiling ? compiling : lazy_tracer();
}

// One subgraph traced: `fn` on placeholders of the carried values' types; what it reads from outside
// (the enclosing trace's values, eager tensors) becomes its captured inputs. `first_captures` are
// captured first, in order, so the body's inputs begin as the cond's do.
struct Subgraph {
  std::shared_ptr<Graph> graph;
  std::vector<Tensor> captured;  // the outside tensors behind its inputs after the carried ones
};

Subgraph trace_subgraph(const Device& device, const std::vector<Tensor>& carried,
                        const std::vector<Tensor>& first_captures, const std::string& name,
                        const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn) {
  Tracer sub(device);
  sub.captures_traced = true;
  std::vector<Tensor> placeholders;
  for (size_t i = 0; i < carried.size(); ++i)
    placeholders.push_back(sub.input(carried[i].type(), "carried" + std::to_string(i)));
  for (const Tensor& t : first_captures) sub.captured_input(t);
  std::vector<Tensor> results;
  {
    CompilingScope scope(sub);
    results = run_branch(fn, placeholders, name);
    sub.set_outputs(results);
  }
  if (!sub.writes().empty())
    throw Error("it updates a parameter, its gradient or optimizer state in place (a " + name +
                " cannot; return the new value as a carried one)");
  Subgraph out;
  for (const auto& [value, tensor] : sub.captured()) out.captured.push_back(tensor);
  out.graph = std::make_shared<Graph>(std::move(sub.graph()));
  return out;
}

void check_carried(const std::vector<Tensor>& carried, const std::vector<Tensor>& next, const Loc& loc) {
  bool same = next.size() == carried.size();
  for (size_t i = 0; same && i < next.size(); ++i) {
    same = next[i].defined() && next[i].dtype() == carried[i].dtype() && next[i].dim() == carried[i].dim();
    for (int64_t d = 0; same && d < next[i].dim(); ++d)
      same = next[i].type().shape[size_t(d)].same_as(carried[i].type().shape[size_t(d)]) ||
             next[i].shape(d) == carried[i].shape(d);
  }
  if (!same)
    throw Error("kiln::while_loop at " + short_location(loc) + ": body_fn took " + types_text(carried) +
                " and returned " + types_text(next) + "; it must keep each value's dtype and shape");
}

// The loop as one graph node: cond and body traced once into subgraphs, the loop itself run by the
// program (core/runtime/while_loop.h). The predicate is never read while tracing.
std::vector<Tensor> traced_while_loop(Tracer& outer, const LoopCondFn& cond_fn, const BranchFn& body_fn,
                                      const std::vector<Tensor>& carried, const Loc& loc) {
  auto fail = [&](const std::string& why) {
    throw Error("kiln::while_loop at " + short_location(loc) + ": " + why);
  };
  for (size_t i = 0; i < carried.size(); ++i)
    if (!carried[i].defined()) fail("carried value " + std::to_string(i) + " is undefined");
  if (carried.empty()) fail("there are no carried values");
  Subgraph cond, body;
  try {
    cond = trace_subgraph(outer.device(), carried, {}, "while_loop.cond", [&](const std::vector<Tensor>& c) {
      const Tensor pred = cond_fn(c);
      check_predicate(pred, "kiln::while_loop", loc);
      return std::vector<Tensor>{pred.dim() == 0 ? pred : reshape(pred, Shape{}, loc)};
    });
    body = trace_subgraph(outer.device(), carried, cond.captured, "while_loop.body", [&](const std::vector<Tensor>& c) {
      std::vector<Tensor> next = body_fn(c);
      check_carried(c, next, loc);
      return next;
    });
  } catch (const GraphBreak& b) {
    throw GraphBreak("kiln::while_loop at " + short_location(loc) + ": its cond_fn or body_fn breaks the graph (" +
                         b.what() + "); the loop then runs on the host",
                     b.where);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("kiln::while_loop at", 0) == 0) throw;
    fail(msg);
  }
  // Both subgraphs take every operand: the carried values, then everything either one captured
  // (the body's captures begin with the cond's; the cond ignores the body's own).
  std::vector<Tensor> operands = carried;
  operands.insert(operands.end(), body.captured.begin(), body.captured.end());
  for (size_t i = cond.captured.size(); i < body.captured.size(); ++i)
    cond.graph->add_input(body.captured[i].type(), "unused" + std::to_string(i));
  AttrMap attrs = {{"carried", int64_t(carried.size())},
                   {"cond", std::shared_ptr<const Graph>(cond.graph)},
                   {"body", std::shared_ptr<const Graph>(body.graph)}};
  return outer.record(OpKind::WhileLoop, operands, attrs, provenance_at(loc));
}

}  // namespace

std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const BranchFn& body_fn,
                               std::vector<Tensor> carried, Loc loc) {
  if (Tracer* outer = enclosing_tracer(carried)) {
    try {
      return traced_while_loop(*outer, cond_fn, body_fn, carried, loc);
    } catch (const GraphBreak&) {
      if (!outer->lazy) throw;  // kiln::compile traces again with graph breaks (lazy segments)
      // Inside a lazy segment: the host loop below, each predicate read running the segment.
    }
  }
  for (;;) {
    const Tensor pred = cond_fn(carried);
    check_predicate(pred, "kiln::while_loop", loc);
    if (!pred.item<bool>(loc)) return carried;
    std::vector<Tensor> next = body_fn(carried);
    check_carried(carried, next, loc);
    carried = std::move(next);
  }
}

}  // namespace kiln
