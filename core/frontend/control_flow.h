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
// the last carried values. body_fn must keep each value's dtype and shape. The predicate is read
// on the host at every iteration: inside kiln::compile that is a graph break (a kiln::Error under
// fullgraph), as a Python while loop is for torch.compile. Compiling the loop into one program,
// with the predicate on the device, is not built yet.
std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const BranchFn& body_fn,
                               std::vector<Tensor> carried, Loc loc = Loc::current());

}  // namespace kiln
