// The window geometry the conv family's gradient rules and expansions read from a node: its
// per-spatial-dim attributes, ONNX defaults filled, and the sizes they need as numbers.
#pragma once

#include <string>
#include <vector>

#include "core/ir/grad_builder.h"

namespace kiln::ops {

struct Window {
  size_t spatial = 0;
  std::vector<int64_t> kernel, stride, dilation, pad_begin, pad_end;

  std::vector<int64_t> pads() const {  // the attribute's order: begins, then ends
    std::vector<int64_t> p = pad_begin;
    p.insert(p.end(), pad_end.begin(), pad_end.end());
    return p;
  }
  int64_t extent(size_t i) const { return dilation[i] * (kernel[i] - 1) + 1; }
};

// The attribute `name` of the builder's node, `count` values; absent or empty means all `fill`.
inline std::vector<int64_t> per_dim(const GradBuilder& b, const char* name, size_t count, int64_t fill) {
  if (!b.attrs().has(name)) return std::vector<int64_t>(count, fill);
  std::vector<int64_t> v = b.attrs().get_ints(name);
  if (v.empty()) v.assign(count, fill);
  return v;
}

// The node's window, input 0 being its [N, C, *spatial] activation.
inline Window window(const GradBuilder& b, std::vector<int64_t> kernel) {
  Window w;
  w.spatial = b.input(0)->type.rank() - 2;
  w.kernel = std::move(kernel);
  w.stride = per_dim(b, "stride", w.spatial, 1);
  w.dilation = per_dim(b, "dilation", w.spatial, 1);
  const std::vector<int64_t> pads = per_dim(b, "padding", 2 * w.spatial, 0);
  w.pad_begin.assign(pads.begin(), pads.begin() + long(w.spatial));
  w.pad_end.assign(pads.begin() + long(w.spatial), pads.end());
  return w;
}

// The spatial dims of `v` ([N, C, *spatial]) as numbers.
inline std::vector<int64_t> spatial_of(const GradBuilder& b, const Value* v, const char* what) {
  std::vector<int64_t> out;
  for (size_t i = 2; i < v->type.rank(); ++i) {
    if (!v->type.shape[i].is_static())
      b.fail(std::string("needs the ") + what + "'s spatial sizes as numbers, got " + v->type.str());
    out.push_back(v->type.shape[i].value());
  }
  return out;
}

inline int64_t channels_of(const GradBuilder& b, const Value* v, const char* what) {
  if (!v->type.shape[1].is_static())
    b.fail(std::string("needs the ") + what + "'s channels as a number, got " + v->type.str());
  return v->type.shape[1].value();
}

inline std::vector<int64_t> iota(size_t from, size_t to) {
  std::vector<int64_t> v;
  for (size_t i = from; i < to; ++i) v.push_back(int64_t(i));
  return v;
}

// `v` sliced to its first `sizes` along the spatial dims (no-op where they already agree).
inline Value* crop_spatial(GradBuilder& b, Value* v, const std::vector<int64_t>& sizes) {
  const std::vector<int64_t> have = spatial_of(b, v, "gradient");
  if (have == sizes) return v;
  const std::vector<int64_t> axes = iota(2, 2 + sizes.size());
  return b.slice(v, axes, std::vector<int64_t>(sizes.size(), 0), sizes, std::vector<int64_t>(sizes.size(), 1));
}

}  // namespace kiln::ops
