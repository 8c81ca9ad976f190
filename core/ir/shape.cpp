// Shape helpers.
#include "core/ir/shape.h"

#include <algorithm>

#include "core/support/error.h"

namespace kiln {

Shape make_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

bool is_static(const Shape& shape) {
  for (const SymInt& d : shape)
    if (!d.is_static()) return false;
  return true;
}

std::vector<int64_t> static_dims(const Shape& shape) {
  std::vector<int64_t> dims;
  dims.reserve(shape.size());
  for (const SymInt& d : shape) dims.push_back(d.value());
  return dims;
}

int64_t numel(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("a shape of " + std::to_string(dims.size()) + " dims has more elements than int64 counts");
  return n;
}

SymInt numel(const Shape& shape) {
  SymInt n = 1;
  for (const SymInt& d : shape) n = n * d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += shape[i].str();
  }
  return s + "]";
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

int64_t normalize_axis(int64_t axis, int64_t rank, const std::string& what) {
  int64_t lo = -rank, hi = rank - 1;
  if (rank == 0) lo = -1, hi = 0;  // a scalar accepts axis 0 / -1, as in PyTorch
  if (axis < lo || axis > hi)
    throw Error(what + ": axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank) + " (valid: " + std::to_string(lo) + ".." + std::to_string(hi) +
                ")");
  return axis < 0 ? axis + (rank == 0 ? 1 : rank) : axis;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = int64_t(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

SymInt slice_first(const SymInt& d, const SymInt& symbolic_start, int64_t step) {
  if (!symbolic_start.is_static()) {  // its sign is a shape decision (a guard where recorded)
    SymInt hi = step > 0 ? d : d - 1;
    SymInt v = symbolic_start < 0 ? d + symbolic_start : symbolic_start;
    return sym_max(0, v + hi - sym_max(v, hi));  // clamp(v, 0, hi)
  }
  const int64_t start = symbolic_start.value();
  if (d.is_static()) {
    int64_t n = d.value();
    if (n == 0) return 0;
    int64_t lo = 0, hi = step > 0 ? n : n - 1;
    if (start == kSliceOpenBegin) return lo;
    if (start == kSliceOpenEnd) return hi;
    return std::clamp(start < 0 ? start + n : start, lo, hi);
  }
  SymInt lo = 0, hi = step > 0 ? d : d - 1;
  if (start == kSliceOpenBegin) return lo;
  if (start == kSliceOpenEnd) return hi;
  SymInt v = start < 0 ? d + start : SymInt(start);
  SymInt at_most_hi = v + hi - sym_max(v, hi);  // min(v, hi)
  return sym_max(lo, at_most_hi);
}

}  // namespace kiln
