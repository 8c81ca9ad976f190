// Views as strides: where a chain of reshape, permute and expand ops reads its source in place,
// the element strides it reads it with. A template that takes strided operands (the matmul
// templates) reads a transpose or a head split through them instead of a copy.
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

// Whether `kind` is a view strides can express (reshape where the bytes allow, permute, expand).
bool is_stride_view(OpKind kind);

// The element strides with which `chain`'s last output reads a row-major source of `source_dims`
// (element (i0, i1, ...) at sum(i_d * strides[d]); 0 where a dim broadcasts); nothing when a step
// cannot be read so (a reshape merging dims a permute split, a pad, a slice).
std::optional<std::vector<int64_t>> strides_through_views(const std::vector<int64_t>& source_dims,
                                                          const std::vector<ViewStep>& chain);

}  // namespace kiln
