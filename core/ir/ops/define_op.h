// The one way the family files (core/ir/ops/*.cpp) write an op's definition; its name and family
// come from op_list.def when the table is built (core/ir/op.cpp).
#pragma once

#include <utility>
#include <vector>

#include "core/ir/op.h"

namespace kiln::ops {

inline OpDef define_op(OpKind kind, std::vector<AttrSpec> attrs, int min_inputs, int max_inputs, InferFn infer) {
  OpDef d;
  d.kind = kind;
  d.attrs = std::move(attrs);
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.infer = std::move(infer);
  return d;
}

}  // namespace kiln::ops
