// Kernel IR: what one GPU launch computes, independent of the backend that prints it.
//  - Pointwise: for each element of an iteration space (dims = params 0..rank-1, row-major), store
//    one expression per output buffer at that element's linear index.
//  - Reduce: the same, plus a loop r in [0, extent) folding `body` with `combiner` into an
//    accumulator; `epilogue` (which may read the accumulator) is what gets stored.
//  - Horizontal: a Pointwise kernel with segments, several independent kernels in one launch. Its
//    iteration space is rank 1 over param 0, the flat extent; each segment covers its own stretch
//    [start, start + size) of it, both params, in order and apart. A segment's stores run only for
//    its elements, with the linear index (and the store position) counted from its start; its
//    expressions read no other coordinate and no param (runtime/horizontal_fusion.h).
// Sizes and strides are integer params, so one compiled kernel serves every size; a LoweredKernel
// pairs the kernel with the values (possibly symbolic) of its params.
#pragma once

#include <map>
#include <optional>
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

struct Segment {
  int start = -1;  // the param holding its first flat element; -1: it starts at 0
  int size = 0;    // the param holding its element count
  std::vector<Store> stores;
};

struct Kernel {
  std::string name;  // e.g. "add_f32_r2": readable, and part of the cache key with the source
  KernelKind kind = KernelKind::Pointwise;
  std::vector<BufferSlot> buffers;  // bindings in order
  int num_params = 0;
  int rank = 0;  // iteration space rank; its dims are params [0, rank)
  std::vector<Store> stores;      // empty in a horizontal kernel
  std::vector<Segment> segments;  // a horizontal kernel's members (see above)
  int segment_alignment = 1;      // every segment starts at a multiple of it (4: vec4 GLSL stays vec4)
  // Built for one shape (a lowering that needs static sizes anyway, like Winograd's transforms): its
  // static sizes are literals in every dialect, as in C++, so index divisions by them fold. Others
  // keep sizes as params in GLSL and CUDA, so one compiled kernel serves every size.
  bool specialized = false;

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
  // Each param's value where it has no symbol, else nullopt (EmitOptions::static_params).
  std::vector<std::optional<int32_t>> static_param_values() const;
  int64_t elements(const std::map<std::string, int64_t>& bindings = {}) const;  // iteration size
};

}  // namespace kiln::kernel
