// Kernel IR: what one GPU launch computes, independent of the backend that prints it.
//  - Pointwise: for each element of an iteration space (dims = params 0..rank-1, row-major), store
//    one expression per output buffer at that element's linear index.
//  - Reduce: the same, plus a loop r in [0, extent) folding `body` with `combiner` into an
//    accumulator; `epilogue` (which may read the accumulator) is what gets stored.
// Sizes and strides are integer params, so one compiled kernel serves every size; a LoweredKernel
// pairs the kernel with the values (possibly symbolic) of its params.
#pragma once

#include <string>
#include <vector>

#include "core/ir/shape.h"
#include "core/kernel/expr.h"

namespace kiln::kernel {

struct BufferSlot {
  DType dtype = DType::F32;
  bool output = false;
};

enum class KernelKind { Pointwise, Reduce };

struct Store {
  int buffer;     // output buffer slot
  ExprRef value;  // of the buffer's dtype
};

struct Kernel {
  std::string name;  // e.g. "add_f32_r2": readable, and part of the cache key with the source
  KernelKind kind = KernelKind::Pointwise;
  std::vector<BufferSlot> buffers;  // bindings in order
  int num_params = 0;
  int rank = 0;  // iteration space rank; its dims are params [0, rank)
  std::vector<Store> stores;

  // Reduce only. body/epilogue may use ExprKind::Coord, reduction_index() and accumulator().
  OpKind combiner = OpKind::Sum;  // Sum, Prod, ReduceMax, ReduceMin, ArgMax, ArgMin
  DType accumulator_type = DType::F32;
  ExprRef extent;                 // I32 expression of params
  ExprRef body;

  std::vector<int> origins() const;  // every graph node id this kernel computes
};

// The reduction loop counter and the running accumulator, for Reduce kernels' expressions.
ExprRef reduction_index();
ExprRef accumulator(DType type);

struct LoweredKernel {
  Kernel kernel;
  std::vector<SymInt> params;  // one per kernel param
  // Integer param values for concrete sizes (symbols bound by `bindings`).
  std::vector<int32_t> param_values(const std::map<std::string, int64_t>& bindings = {}) const;
  int64_t elements(const std::map<std::string, int64_t>& bindings = {}) const;  // iteration size
};

}  // namespace kiln::kernel
