// Lowering: one graph op with known types -> the kernels that compute it. Generic lowerings cover
// every op with pointwise and reduce kernels (index maps for data movement, reductions for matmul,
// conv and pooling); tuned templates may replace them per backend.
#pragma once

#include <functional>
#include <vector>

#include "core/ir/attr.h"
#include "core/kernel/kernel.h"

namespace kiln::kernel {

struct LoweredOp {
  struct Step {
    LoweredKernel kernel;
    // Buffer slot i of the kernel binds args[i]: 0..n_in-1 are the op's inputs, then its outputs,
    // then temps.
    std::vector<int> args;
  };
  std::vector<TensorType> temps;  // scratch buffers the steps share
  std::vector<Step> steps;
};

// Throws kiln::Error naming the op when it has no lowering yet. `origin` is the graph node id
// recorded on the kernels' expressions.
LoweredOp lower_op(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                   const std::vector<TensorType>& outputs, int origin = 0);

// Building blocks shared by the family lowerings.
class KernelBuilder {
 public:
  // A kernel iterating over `space` (its dims become params 0..rank-1).
  KernelBuilder(std::string name, KernelKind kind, const Shape& space);
  int add_buffer(DType dtype, bool output);
  ExprRef param_for(const SymInt& value);  // a param slot holding value (constants inline)
  // Offset into a row-major tensor of shape `in` broadcast (numpy rules) to the iteration space.
  ExprRef broadcast_offset(const Shape& in);
  // Row-major offset of `coords` (one I32 expr per dim) into a tensor of shape `dims`.
  ExprRef offset_of(const std::vector<ExprRef>& coords, const Shape& dims);
  Kernel& kernel() { return lowered_.kernel; }
  LoweredKernel finish();

 private:
  LoweredKernel lowered_;
  Shape space_;
};

// Family lowerings (lower.cpp dispatches).
LoweredOp lower_pointwise(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                          const std::vector<TensorType>& outputs, int origin);
LoweredOp lower_reduce(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                       const std::vector<TensorType>& outputs, int origin);
LoweredOp lower_shape(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                      const std::vector<TensorType>& outputs, int origin);
LoweredOp lower_linalg(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                       const std::vector<TensorType>& outputs, int origin);
LoweredOp lower_conv(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                     const std::vector<TensorType>& outputs, int origin);
// winograd_weights, winograd_input and winograd_output (lower_winograd.cpp; lower_conv dispatches).
LoweredOp lower_winograd(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                         const TensorType& out, int origin);
LoweredOp lower_norm(OpKind kind, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                     const std::vector<TensorType>& outputs, int origin);

}  // namespace kiln::kernel
