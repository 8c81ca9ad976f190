// strides_through_views: each view op maps the strides of its input to those of its output, as
// torch's view rules do; a reshape splits and merges only dims whose elements lie evenly apart.
#include "core/ir/strided_view.h"

#include "core/ir/shape.h"

namespace kiln {
namespace {

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// torch's computeStride: walks the old dims from the innermost, in chunks whose elements lie
// evenly apart, and gives each chunk's new dims strides within it; nothing when a new dim would
// span two chunks.
std::optional<std::vector<int64_t>> reshaped(const std::vector<int64_t>& old_dims,
                                             const std::vector<int64_t>& old_strides,
                                             const std::vector<int64_t>& new_dims) {
  if (old_dims.empty() || product(old_dims) == 0) return contiguous_strides(new_dims);
  std::vector<int64_t> strides(new_dims.size(), 0);
  int64_t view_d = int64_t(new_dims.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_dims.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_dims[size_t(tensor_d)];
    const bool chunk_ends = tensor_d == 0 || (old_dims[size_t(tensor_d - 1)] != 1 &&
                                              old_strides[size_t(tensor_d - 1)] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_dims[size_t(view_d)] == 1)) {
      strides[size_t(view_d)] = view_numel * chunk_base_stride;
      view_numel *= new_dims[size_t(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[size_t(tensor_d - 1)];
      tensor_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

std::optional<std::vector<int64_t>> permuted(const AttrMap& attrs, const std::vector<int64_t>& strides) {
  const std::vector<int64_t>& order = attrs.get_ints("dims");
  if (order.size() != strides.size()) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t d : order) {
    if (d < 0) d += int64_t(strides.size());
    if (d < 0 || d >= int64_t(strides.size())) return std::nullopt;
    out.push_back(strides[size_t(d)]);
  }
  return out;
}

// Right-aligned broadcast: a new leading dim, or a dim of 1 grown, reads one element (stride 0).
std::optional<std::vector<int64_t>> expanded(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& strides,
                                             const std::vector<int64_t>& out_dims) {
  if (out_dims.size() < in_dims.size()) return std::nullopt;
  const size_t lead = out_dims.size() - in_dims.size();
  std::vector<int64_t> out(out_dims.size(), 0);
  for (size_t i = 0; i < in_dims.size(); ++i) {
    if (in_dims[i] == out_dims[lead + i]) out[lead + i] = strides[i];
    else if (in_dims[i] != 1) return std::nullopt;
  }
  return out;
}

// ONNX Slice: along each sliced axis the view starts at its first element and steps by its step;
// the output dims say how many it takes.
std::optional<std::vector<int64_t>> sliced(const AttrMap& attrs, const std::vector<int64_t>& in_dims,
                                           const std::vector<int64_t>& strides, int64_t& offset) {
  const std::vector<SymInt>& starts = attrs.get_syms("starts");
  const std::vector<int64_t>& axes = attrs.get_ints("axes");
  const std::vector<int64_t>& steps = attrs.get_ints("steps");
  std::vector<int64_t> out = strides;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes.empty() ? int64_t(i) : axes[i];
    if (axis < 0) axis += int64_t(in_dims.size());
    const int64_t step = steps.empty() ? 1 : steps[i];
    if (axis < 0 || axis >= int64_t(in_dims.size()) || step <= 0 || !starts[i].is_static()) return std::nullopt;
    const SymInt first = slice_first(SymInt(in_dims[size_t(axis)]), starts[i], step);
    if (!first.is_static()) return std::nullopt;
    offset += first.value() * strides[size_t(axis)];
    out[size_t(axis)] = strides[size_t(axis)] * step;
  }
  return out;
}

}  // namespace

bool is_stride_view(OpKind kind) {
  return kind == OpKind::Reshape || kind == OpKind::Permute || kind == OpKind::Expand || kind == OpKind::Slice;
}

std::optional<StridedLayout> strides_through_views(const std::vector<int64_t>& source_dims,
                                                   const std::vector<ViewStep>& chain) {
  std::vector<int64_t> dims = source_dims;
  StridedLayout layout{contiguous_strides(source_dims), 0};
  for (const ViewStep& step : chain) {
    std::optional<std::vector<int64_t>> strides;
    switch (step.kind) {
      case OpKind::Reshape: strides = reshaped(dims, layout.strides, step.out_dims); break;
      case OpKind::Permute: strides = permuted(*step.attrs, layout.strides); break;
      case OpKind::Expand: strides = expanded(dims, layout.strides, step.out_dims); break;
      case OpKind::Slice: strides = sliced(*step.attrs, dims, layout.strides, layout.offset); break;
      default: return std::nullopt;
    }
    if (!strides || strides->size() != step.out_dims.size()) return std::nullopt;
    layout.strides = std::move(*strides);
    dims = step.out_dims;
  }
  return layout;
}

bool is_row_major(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if (strides.size() != dims.size()) return false;
  int64_t expected = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1 && strides[d] != expected) return false;
    expected *= dims[d];
  }
  return true;
}

}  // namespace kiln
