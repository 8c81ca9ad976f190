// The one path every op function takes: check the call, then run it now on the inputs' device
// (eager) or record it into the graph being traced. Either way the op's shape rule validates the
// call first, so eager and compiled code reject the same mistakes with the same message.
#pragma once

#include <functional>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/ir/attr.h"
#include "core/ir/op.h"

namespace kiln {

std::vector<Tensor> run_op(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                           const Loc& loc);
Tensor run_op1(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
               const Loc& loc);

// The same, for callers that already hold a provenance (graph interpreters, importers).
std::vector<Tensor> run_op_at(OpKind kind, const std::vector<Tensor>& inputs, const AttrMap& attrs,
                              const Provenance& where);

// Called after every eager op with its kind, where it was called and its outputs; for tools such as
// the demo's op log. One observer per thread; pass nullptr to remove it.
using OpObserver = std::function<void(OpKind, const Provenance&, const std::vector<Tensor>&)>;
void set_op_observer(OpObserver observer);

// The provenance an op called at `loc` records: that line plus the current module scope.
Provenance provenance_at(const Loc& loc);

// A 0-d tensor holding `value` for a scalar operand of `like`: same device; like's dtype unless
// the scalar is fractional and like is integral (then f32, as PyTorch promotes).
Tensor scalar_operand(double value, const Tensor& like, const Loc& loc);

}  // namespace kiln
