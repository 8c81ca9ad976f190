// Views as strides: where a chain of reshape, permute, expand and slice ops reads its source in
// place, the element strides (and first element) it reads it with. A template that takes strided
// operands (the matmul templates) reads a transpose or a head split through them instead of a copy.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/op.h"

namespace kiln {

// One view op of a chain, at concrete sizes: its kind, attributes and output dims.
struct ViewStep {
  OpKind kind = OpKind::Reshape;
  const AttrMap* attrs = nullptr;
  std::vector<int64_t> out_dims;
};

// Whether `kind` is a view strides can express (reshape where the bytes allow, permute, expand,
// slice with positive steps).
bool is_stride_view(OpKind kind);

// Where a view reads its source: element (i0, i1, ...) at offset + sum(i_d * strides[d]); a stride
// is 0 where a dim broadcasts.
struct StridedLayout {
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// The layout with which `chain`'s last output reads a row-major source of `source_dims`; nothing
// when a step cannot be read so (a reshape merging dims a permute split, a pad, a slice whose start
// is known only at run time or whose step is negative).
std::optional<StridedLayout> strides_through_views(const std::vector<int64_t>& source_dims,
                                                   const std::vector<ViewStep>& chain);

// Whether `strides` read `dims` row-major (a contiguous slice of rows, a reshape): such a view is its
// source's elements from `offset` on, as they lie. Size-1 dims may have any stride.
bool is_row_major(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);

}  // namespace kiln
