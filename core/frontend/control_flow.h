// Data-dependent control flow: kiln::cond (without a graph break, as torch.cond) and
// kiln::while_loop.
#pragma once

#include <functional>
#include <vector>

#include "core/frontend/tensor.h"

namespace kiln {

using BranchFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// then_fn(operands) where `pred` (a one-element bool tensor) is true, else else_fn(operands). Both
// branches must return the same number of tensors, with the same dtypes and shapes.
// - Eagerly, pred is read and only that branch runs.
// - Traced (pred computed inside kiln::compile), both branches are traced, their ops scoped
//   "cond.then" and "cond.else" under the caller's scope, and each output selects between them on
//   the device, where(pred, then, else): the host never reads pred and the compiled program has no
//   graph break. Both branches compute, as predicated code does on a GPU.
// A mismatch between the branches' results is a kiln::Error naming both and the caller's line.
std::vector<Tensor> cond(const Tensor& pred, const BranchFn& then_fn, const BranchFn& else_fn,
                         const std::vector<Tensor>& operands, Loc loc = Loc::current());

using LoopCondFn = std::function<Tensor(const std::vector<Tensor>&)>;

// While cond_fn(carried) (a one-element bool tensor) is true, carried = body_fn(carried); returns
// the last carried values. body_fn must keep each value's dtype and shape.
// - Eagerly, a host loop.
// - Traced (inside kiln::compile), as torch.while_loop: cond_fn and body_fn are traced once into
//   subgraphs of one while_loop node, their ops scoped "while_loop.cond" and "while_loop.body". What
//   they read from outside (traced values, parameters) becomes the node's operands. The compiled
//   program has no graph break: it compiles each subgraph (fused) once and runs the loop on the
//   host, reading the predicate back at every iteration, since no backend branches on the device
//   yet. A cond_fn or body_fn that reads a tensor's data, or writes a parameter in place, cannot be
//   traced: the former makes the loop a host loop with graph breaks (an error under fullgraph),
//   the latter is an error. Gradients through a traced loop are not built (an error naming it).
std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const BranchFn& body_fn,
                               std::vector<Tensor> carried, Loc loc = Loc::current());

}  // namespace kiln
