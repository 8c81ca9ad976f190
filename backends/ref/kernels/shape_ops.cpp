// Reference kernels for the data-movement ops. They move bytes, so every dtype shares one path:
// whole rows go through memcpy, single elements through a word of the element's size.
#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/parallel.h"
#include "core/support/error.h"
#include "core/support/random.h"

namespace kiln::reference {
namespace {

constexpr int64_t kGrainBytes = 1 << 16;
constexpr int64_t kOpenEnd = std::numeric_limits<int64_t>::max();
constexpr int64_t kOpenBegin = std::numeric_limits<int64_t>::min();

using Bytes = uint8_t;

// Calls fn.template operator()<W>() with W an unsigned word as wide as one element.
template <class Fn>
void visit_word(size_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1: fn.template operator()<uint8_t>(); return;
    case 2: fn.template operator()<uint16_t>(); return;
    case 4: fn.template operator()<uint32_t>(); return;
    case 8: fn.template operator()<uint64_t>(); return;
  }
  throw Error("shape kernels: unexpected element size " + std::to_string(element_size));
}

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

// Rows per parallel chunk so that a chunk moves about kGrainBytes.
int64_t row_grain(int64_t row_bytes) {
  return std::max<int64_t>(1, kGrainBytes / std::max<int64_t>(row_bytes, 1));
}

// A source read through arbitrary element strides (0 broadcasts, negative walks backwards),
// written to a contiguous destination in row-major order of `dims`.
struct StridedView {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// Size-1 dims go, and neighbours that are one run in the source merge, so that inner rows are as
// long as possible (a transpose of [N,C,H,W] to [N,H,W,C] becomes a 3-d copy).
StridedView simplify(const StridedView& v) {
  StridedView s;
  s.offset = v.offset;
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (v.dims[i] == 1) continue;
    if (!s.dims.empty() && s.strides.back() == v.strides[i] * v.dims[i]) {
      s.dims.back() *= v.dims[i];
      s.strides.back() = v.strides[i];
    } else {
      s.dims.push_back(v.dims[i]);
      s.strides.push_back(v.strides[i]);
    }
  }
  if (s.dims.empty()) s.dims = {1}, s.strides = {1};
  return s;
}

void copy_strided(const StridedView& view, const void* src, void* dst, size_t element_size) {
  for (int64_t d : view.dims)
    if (d == 0) return;
  const StridedView v = simplify(view);
  const size_t outer_rank = v.dims.size() - 1;
  const int64_t inner = v.dims.back(), inner_stride = v.strides.back();
  const int64_t rows = product(v.dims, 0, outer_rank);
  visit_word(element_size, [&]<class W>() {
    const W* in = static_cast<const W*>(src);
    W* out = static_cast<W*>(dst);
    parallel_for(rows, row_grain(inner * int64_t(sizeof(W))), [&](int64_t b, int64_t e) {
      std::vector<int64_t> coord(outer_rank);
      int64_t base = v.offset;
      for (int64_t r = b, k = int64_t(outer_rank) - 1; k >= 0; --k) {
        coord[size_t(k)] = r % v.dims[size_t(k)];
        r /= v.dims[size_t(k)];
        base += coord[size_t(k)] * v.strides[size_t(k)];
      }
      for (int64_t row = b; row < e; ++row) {
        W* o = out + row * inner;
        const W* i = in + base;
        if (inner_stride == 1) std::memcpy(o, i, size_t(inner) * sizeof(W));
        else for (int64_t j = 0; j < inner; ++j) o[j] = i[j * inner_stride];
        for (int64_t k = int64_t(outer_rank) - 1; k >= 0; --k) {  // next row
          base += v.strides[size_t(k)];
          if (++coord[size_t(k)] < v.dims[size_t(k)]) break;
          base -= coord[size_t(k)] * v.strides[size_t(k)];
          coord[size_t(k)] = 0;
        }
      }
    });
  });
}

void reshape_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  if (ctx.outputs[0].data != x.data)
    std::memcpy(ctx.outputs[0].data, x.data, size_t(x.numel()) * dtype_size(x.dtype));
}

void permute_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const auto& dims = ctx.attrs.get_ints("dims");
  const int64_t rank = int64_t(x.dims.size());
  const std::vector<int64_t> in_strides = contiguous_strides(x.dims);
  StridedView v;
  for (int64_t d : dims) {
    int64_t n = d < 0 ? d + rank : d;
    v.dims.push_back(x.dims[size_t(n)]);
    v.strides.push_back(in_strides[size_t(n)]);
  }
  copy_strided(v, x.data, ctx.outputs[0].data, dtype_size(x.dtype));
}

// ONNX Slice on a static dim, as numpy slices: the first index read and the count (the shape
// rule's slice_length on static sizes).
struct SliceRange {
  int64_t first = 0, count = 0;
};

SliceRange slice_range(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (d == 0) return {};
  auto resolve = [d](int64_t i, int64_t lo, int64_t hi) {
    if (i == kOpenBegin) return lo;
    if (i == kOpenEnd) return hi;
    if (i < 0) i += d;
    return std::clamp(i, lo, hi);
  };
  if (step > 0) {
    int64_t s = resolve(start, 0, d), e = resolve(end, 0, d);
    return {s, e > s ? (e - s - 1) / step + 1 : 0};
  }
  int64_t s = resolve(start, -1, d - 1), e = resolve(end, -1, d - 1);
  return {s, s > e ? (s - e - 1) / -step + 1 : 0};
}

void slice_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const auto& starts = ctx.attrs.get_syms("starts");  // static here: the run's values
  const auto& ends = ctx.attrs.get_syms("ends");
  const auto& axes_attr = ctx.attrs.get_ints("axes");
  const auto& steps_attr = ctx.attrs.get_ints("steps");
  const int64_t rank = int64_t(x.dims.size());
  StridedView v;
  v.dims = x.dims;
  v.strides = contiguous_strides(x.dims);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes_attr.empty() ? int64_t(i) : axes_attr[i];
    if (axis < 0) axis += rank;
    const int64_t step = steps_attr.empty() ? 1 : steps_attr[i];
    const SliceRange r = slice_range(x.dims[size_t(axis)], starts[i].value(), ends[i].value(), step);
    v.offset += r.first * v.strides[size_t(axis)];
    v.dims[size_t(axis)] = r.count;
    v.strides[size_t(axis)] *= step;
  }
  copy_strided(v, x.data, ctx.outputs[0].data, dtype_size(x.dtype));
}

// Concat and split: each outer index (dims before `dim`) holds one contiguous block per piece.
struct Blocks {
  int64_t outer = 1;
  int64_t inner_bytes = 1;  // bytes of one index along `dim`, times the dims after it
};

Blocks blocks_of(const std::vector<int64_t>& dims, int64_t dim, DType dtype) {
  return {product(dims, 0, size_t(dim)),
          product(dims, size_t(dim) + 1, dims.size()) * int64_t(dtype_size(dtype))};
}

void concat_kernel(const KernelContext& ctx) {
  const HostTensor& out = ctx.outputs[0];
  const int64_t dim = ctx.attrs.get_int("dim") < 0 ? ctx.attrs.get_int("dim") + int64_t(out.dims.size())
                                                   : ctx.attrs.get_int("dim");
  const Blocks b = blocks_of(out.dims, dim, out.dtype);
  const int64_t out_row = out.dims[size_t(dim)] * b.inner_bytes;
  parallel_for(b.outer, row_grain(out_row), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      Bytes* dst = static_cast<Bytes*>(out.data) + o * out_row;
      for (const HostTensor& in : ctx.inputs) {
        const int64_t chunk = in.dims[size_t(dim)] * b.inner_bytes;
        std::memcpy(dst, static_cast<const Bytes*>(in.data) + o * chunk, size_t(chunk));
        dst += chunk;
      }
    }
  });
}

void split_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const int64_t dim = ctx.attrs.get_int("dim") < 0 ? ctx.attrs.get_int("dim") + int64_t(x.dims.size())
                                                   : ctx.attrs.get_int("dim");
  const Blocks b = blocks_of(x.dims, dim, x.dtype);
  const int64_t in_row = x.dims[size_t(dim)] * b.inner_bytes;
  parallel_for(b.outer, row_grain(in_row), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const Bytes* src = static_cast<const Bytes*>(x.data) + o * in_row;
      for (const HostTensor& out : ctx.outputs) {
        const int64_t chunk = out.dims[size_t(dim)] * b.inner_bytes;
        std::memcpy(static_cast<Bytes*>(out.data) + o * chunk, src, size_t(chunk));
        src += chunk;
      }
    }
  });
}

int64_t read_index(const HostTensor& index, int64_t i) {
  return index.dtype == DType::I64 ? index.as<int64_t>()[i] : int64_t(index.as<int32_t>()[i]);
}

[[noreturn]] void throw_bad_index(int64_t value, int64_t dim, int64_t size) {
  throw Error("index " + std::to_string(value) + " is out of range for dim " + std::to_string(dim) +
              " of size " + std::to_string(size) + " (valid: " + std::to_string(-size) + ".." +
              std::to_string(size - 1) + ")");
}

// The first out-of-range index by position, collected from parallel chunks.
class BadIndex {
 public:
  void report(int64_t position, int64_t value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!position_ || position < *position_) position_ = position, value_ = value;
  }
  void throw_if_any(int64_t dim, int64_t size) const {
    if (position_) throw_bad_index(value_, dim, size);
  }

 private:
  std::mutex mutex_;
  std::optional<int64_t> position_;
  int64_t value_ = 0;
};

// torch.gather / ONNX GatherElements: out[c] = x[c with c[dim] replaced by index[c]].
void gather_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const HostTensor& index = ctx.inputs[1];
  const HostTensor& out = ctx.outputs[0];
  const int64_t rank = int64_t(x.dims.size());
  if (out.numel() == 0) return;
  int64_t dim = ctx.attrs.get_int("dim");
  if (dim < 0) dim += std::max<int64_t>(rank, 1);
  const std::vector<int64_t> xs = contiguous_strides(x.dims);
  const int64_t size = rank == 0 ? 1 : x.dims[size_t(dim)];
  const int64_t dim_stride = rank == 0 ? 0 : xs[size_t(dim)];
  BadIndex bad;
  visit_word(dtype_size(x.dtype), [&]<class W>() {
    const W* in = x.as<W>();
    W* o = out.as<W>();
    parallel_for(out.numel(), kGrainBytes / int64_t(sizeof(W)), [&](int64_t b, int64_t e) {
      std::vector<int64_t> coord(static_cast<size_t>(rank));
      int64_t base = 0;  // x offset of coord without the `dim` term
      for (int64_t r = b, k = rank - 1; k >= 0; --k) {
        coord[size_t(k)] = r % index.dims[size_t(k)];
        r /= index.dims[size_t(k)];
        if (k != dim) base += coord[size_t(k)] * xs[size_t(k)];
      }
      for (int64_t i = b; i < e; ++i) {
        int64_t idx = read_index(index, i);
        if (idx < 0) idx += size;
        if (idx < 0 || idx >= size) {
          bad.report(i, read_index(index, i));
          o[i] = W(0);
        } else {
          o[i] = in[base + idx * dim_stride];
        }
        for (int64_t k = rank - 1; k >= 0; --k) {
          if (k != dim) base += xs[size_t(k)];
          if (++coord[size_t(k)] < index.dims[size_t(k)]) break;
          if (k != dim) base -= coord[size_t(k)] * xs[size_t(k)];
          coord[size_t(k)] = 0;
        }
      }
    });
  });
  bad.throw_if_any(dim, size);
}

// ONNX Gather: whole slices along dim, picked by an index of any rank.
void index_select_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const HostTensor& index = ctx.inputs[1];
  int64_t dim = ctx.attrs.get_int("dim");
  if (dim < 0) dim += int64_t(x.dims.size());
  const int64_t size = x.dims[size_t(dim)];
  const int64_t count = index.numel();
  std::vector<int64_t> picks(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) {  // checked up front: cheap next to the copy
    int64_t idx = read_index(index, j);
    if (idx < -size || idx >= size) throw_bad_index(idx, dim, size);
    picks[size_t(j)] = idx < 0 ? idx + size : idx;
  }
  const Blocks b = blocks_of(x.dims, dim, x.dtype);
  const auto* src = static_cast<const Bytes*>(x.data);
  auto* dst = static_cast<Bytes*>(ctx.outputs[0].data);
  parallel_for(b.outer * count, row_grain(b.inner_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / count, j = r % count;
      std::memcpy(dst + r * b.inner_bytes, src + (o * size + picks[size_t(j)]) * b.inner_bytes,
                  size_t(b.inner_bytes));
    }
  });
}

void expand_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const HostTensor& out = ctx.outputs[0];
  const size_t lead = out.dims.size() - x.dims.size();
  const std::vector<int64_t> xs = contiguous_strides(x.dims);
  StridedView v;
  v.dims = out.dims;
  v.strides.assign(out.dims.size(), 0);
  for (size_t i = 0; i < x.dims.size(); ++i)
    if (x.dims[i] != 1) v.strides[lead + i] = xs[i];
  copy_strided(v, x.data, out.data, dtype_size(x.dtype));
}

// Tile is a strided view over [r0, d0, r1, d1, ...]: the repeat dims have stride 0.
void tile_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const auto& repeats = ctx.attrs.get_ints("repeats");
  const std::vector<int64_t> xs = contiguous_strides(x.dims);
  StridedView v;
  for (size_t k = 0; k < x.dims.size(); ++k) {
    v.dims.insert(v.dims.end(), {repeats[k], x.dims[k]});
    v.strides.insert(v.strides.end(), {0, xs[k]});
  }
  copy_strided(v, x.data, ctx.outputs[0].data, dtype_size(x.dtype));
}

// Pad: for every dim, a table from output position to input position (-1: the fill value).
void pad_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const HostTensor& out = ctx.outputs[0];
  const auto& pads = ctx.attrs.get_ints("pads");
  const std::string& mode = ctx.attrs.get_string("mode");
  const size_t rank = x.dims.size();
  const size_t esize = dtype_size(x.dtype);
  if (rank == 0) {
    std::memcpy(out.data, x.data, esize);
    return;
  }
  std::vector<std::vector<int64_t>> maps(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t d = x.dims[k], begin = pads[k];
    for (int64_t o = 0; o < out.dims[k]; ++o) {
      int64_t i = o - begin;
      if (i < 0 || i >= d) {
        if (mode == "edge") i = std::clamp<int64_t>(i, 0, d - 1);
        else if (mode == "reflect") i = i < 0 ? -i : 2 * (d - 1) - i;  // pads < d: one bounce
        else i = -1;
      }
      maps[k].push_back(i);
    }
  }
  std::vector<Bytes> fill(esize);
  const double value = ctx.attrs.get_float("value");
  convert_elements(&value, DType::F64, fill.data(), x.dtype, 1);

  // The last dim's interior maps one-to-one onto the input row: copy it in one memcpy.
  const int64_t inner = out.dims.back(), last_begin = pads[rank - 1];
  const int64_t lo = std::clamp<int64_t>(last_begin, 0, inner);
  const int64_t hi = std::clamp<int64_t>(last_begin + x.dims.back(), lo, inner);
  const std::vector<int64_t> xs = contiguous_strides(x.dims);
  const int64_t rows = product(out.dims, 0, rank - 1);
  if (inner == 0 || rows == 0) return;
  visit_word(esize, [&]<class W>() {
    const W* in = x.as<W>();
    W* o = out.as<W>();
    W fill_word;
    std::memcpy(&fill_word, fill.data(), sizeof(W));
    const std::vector<int64_t>& last = maps[rank - 1];
    parallel_for(rows, row_grain(inner * int64_t(sizeof(W))), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        W* dst = o + row * inner;
        int64_t base = 0;
        bool filled = false;
        for (int64_t r = row, k = int64_t(rank) - 2; k >= 0; --k) {
          const int64_t i = maps[size_t(k)][size_t(r % out.dims[size_t(k)])];
          r /= out.dims[size_t(k)];
          if (i < 0) filled = true;
          else base += i * xs[size_t(k)];
        }
        if (filled) {
          std::fill(dst, dst + inner, fill_word);
          continue;
        }
        const W* src = in + base;
        for (int64_t j = 0; j < lo; ++j) dst[j] = last[size_t(j)] < 0 ? fill_word : src[last[size_t(j)]];
        if (hi > lo) std::memcpy(dst + lo, src + (lo - last_begin), size_t(hi - lo) * sizeof(W));
        for (int64_t j = hi; j < inner; ++j)
          dst[j] = last[size_t(j)] < 0 ? fill_word : src[last[size_t(j)]];
      }
    });
  });
}

void constant_kernel(const KernelContext& ctx) {
  const Literal& lit = ctx.attrs.get_tensor("value");
  std::memcpy(ctx.outputs[0].data, lit.bytes.data(), lit.bytes.size());
}

// The values are this run's integers by now (the caller evaluates symbolic attributes).
void sym_ints_kernel(const KernelContext& ctx) {
  const std::vector<SymInt>& values = ctx.attrs.get_syms("values");
  for (size_t i = 0; i < values.size(); ++i) {
    if (ctx.outputs[0].dtype == DType::I32)
      static_cast<int32_t*>(ctx.outputs[0].data)[i] = int32_t(values[i].value());
    else
      static_cast<int64_t*>(ctx.outputs[0].data)[i] = values[i].value();
  }
}

void arange_kernel(const KernelContext& ctx) {
  const double start = ctx.attrs.get_float("start"), step = ctx.attrs.get_float("step");
  const HostTensor& out = ctx.outputs[0];
  std::vector<double> values(size_t(out.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + double(i) * step;
  convert_elements(values.data(), DType::F64, out.data, out.dtype, values.size());
}

void rand_uniform_kernel(const KernelContext& ctx) {
  uint64_t seed;
  std::memcpy(&seed, ctx.inputs[0].data, sizeof seed);
  if (ctx.attrs.get_bool("mix")) seed = stream_of_counter(seed);
  const HostTensor& out = ctx.outputs[0];
  float* values = static_cast<float*>(out.data);
  for (int64_t i = 0; i < out.numel(); ++i) values[i] = uniform_f32(seed, uint64_t(i));
}

}  // namespace

void register_shape(KernelTable& t) {
  t.set(OpKind::Constant, constant_kernel);
  t.set(OpKind::SymInts, sym_ints_kernel);
  t.set(OpKind::Arange, arange_kernel);
  t.set(OpKind::RandUniform, rand_uniform_kernel);
  t.set(OpKind::Reshape, reshape_kernel);
  t.set(OpKind::Permute, permute_kernel);
  t.set(OpKind::Slice, slice_kernel);
  t.set(OpKind::Concat, concat_kernel);
  t.set(OpKind::Split, split_kernel);
  t.set(OpKind::Gather, gather_kernel);
  t.set(OpKind::IndexSelect, index_select_kernel);
  t.set(OpKind::Expand, expand_kernel);
  t.set(OpKind::Pad, pad_kernel);
  t.set(OpKind::Tile, tile_kernel);
}

}  // namespace kiln::reference
