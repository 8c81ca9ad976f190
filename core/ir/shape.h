// Shapes (lists of SymInt), tensor types (dtype + shape) and the helpers shape rules share.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/symint.h"

namespace kiln {

using Shape = std::vector<SymInt>;

Shape make_shape(const std::vector<int64_t>& dims);
bool is_static(const Shape& shape);
// Static sizes; throws kiln::Error when a dim is symbolic.
std::vector<int64_t> static_dims(const Shape& shape);
SymInt numel(const Shape& shape);
// Elements of a tensor with these concrete dims (1 for a scalar).
int64_t numel(std::span<const int64_t> dims);
std::string shape_str(const Shape& shape);  // "[2,s0,4]"

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  size_t rank() const { return shape.size(); }
  std::string str() const;  // "f32[2,s0,4]"
};

// Normalizes a possibly negative axis; throws kiln::Error naming `what` when out of range.
// ONNX Slice bounds past either end: a start or end of kSliceOpenEnd runs to the end, one of
// kSliceOpenBegin to before the first element (what a negative step needs to reach index 0).
constexpr int64_t kSliceOpenEnd = INT64_MAX;
constexpr int64_t kSliceOpenBegin = INT64_MIN;
// The first element a slice from `start` by `step` reads along a dim of size d (ONNX clamping,
// as numpy). Symbolic sizes give a SymInt expression evaluated at launch; no guard is recorded
// for them. A symbolic start's sign is decided by its hint (a guard).
SymInt slice_first(const SymInt& d, const SymInt& start, int64_t step);

int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& what);

// Row-major strides of static dims.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

}  // namespace kiln
