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

}  // namespace

bool is_stride_view(OpKind kind) {
  return kind == OpKind::Reshape || kind == OpKind::Permute || kind == OpKind::Expand;
}

std::optional<std::vector<int64_t>> strides_through_views(const std::vector<int64_t>& source_dims,
                                                          const std::vector<ViewStep>& chain) {
  std::vector<int64_t> dims = source_dims;
  std::optional<std::vector<int64_t>> strides = contiguous_strides(source_dims);
  for (const ViewStep& step : chain) {
    switch (step.kind) {
      case OpKind::Reshape: strides = reshaped(dims, *strides, step.out_dims); break;
      case OpKind::Permute: strides = permuted(*step.attrs, *strides); break;
      case OpKind::Expand: strides = expanded(dims, *strides, step.out_dims); break;
      default: return std::nullopt;
    }
    if (!strides || strides->size() != step.out_dims.size()) return std::nullopt;
    dims = step.out_dims;
  }
  return strides;
}

}  // namespace kiln
