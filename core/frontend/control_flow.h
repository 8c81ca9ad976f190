// Data-dependent branching without a graph break, as torch.cond.
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

}  // namespace kiln
