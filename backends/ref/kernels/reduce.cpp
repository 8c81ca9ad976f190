// Reference kernels for the reduce ops. Floats accumulate in double, integers in int64; work is
// split over output positions, with the innermost kept dim handled a tile at a time so that
// reducing a leading dim still reads memory in order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/parallel.h"
#include "core/support/error.h"

namespace kiln::reference {
namespace {

constexpr int64_t kTile = 64;        // innermost kept positions reduced together
constexpr int64_t kSoftmaxScratch = 1 << 16;  // doubles of exp() a softmax tile may keep

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

// The input seen as kept and reduced dims after dropping size-1 dims and merging neighbours of
// the same kind. The innermost merged dim is either kept (inner_kept > 1) or reduced
// (inner_reduced > 1), never both, so a reduction reads rows that are contiguous or one tile wide.
struct ReducePlan {
  std::vector<int64_t> kept_dims, kept_strides;        // outer kept dims, input strides
  std::vector<int64_t> reduced_dims, reduced_strides;  // reduced dims but the innermost
  int64_t inner_kept = 1, inner_reduced = 1;
  int64_t groups = 1;       // product of kept_dims
  int64_t outer_steps = 1;  // product of reduced_dims
  int64_t count() const { return outer_steps * inner_reduced; }  // elements per output
};

ReducePlan make_plan(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  std::vector<int64_t> strides = contiguous_strides(dims);
  struct Dim { int64_t size, stride; bool reduced; };
  std::vector<Dim> merged;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    // Row-major with size-1 dims gone: a neighbour's stride is always size * stride here.
    if (!merged.empty() && merged.back().reduced == reduced[i]) {
      merged.back().size *= dims[i];
      merged.back().stride = strides[i];
    } else {
      merged.push_back({dims[i], strides[i], bool(reduced[i])});
    }
  }
  ReducePlan p;
  if (!merged.empty()) {
    (merged.back().reduced ? p.inner_reduced : p.inner_kept) = merged.back().size;
    merged.pop_back();
  }
  for (const Dim& d : merged) {
    auto& sizes = d.reduced ? p.reduced_dims : p.kept_dims;
    auto& strides_of = d.reduced ? p.reduced_strides : p.kept_strides;
    sizes.push_back(d.size);
    strides_of.push_back(d.stride);
    (d.reduced ? p.outer_steps : p.groups) *= d.size;
  }
  return p;
}

// Walks a row-major index space, tracking the matching input offset.
class Odometer {
 public:
  Odometer(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides)
      : dims_(dims), strides_(strides), counter_(dims.size(), 0) {}
  void seek(int64_t linear) {
    offset_ = 0;
    for (size_t i = dims_.size(); i-- > 0;) {
      counter_[i] = dims_[i] ? linear % dims_[i] : 0;  // a size-0 dim is never walked
      linear = dims_[i] ? linear / dims_[i] : 0;
      offset_ += counter_[i] * strides_[i];
    }
  }
  void next() {
    for (size_t i = dims_.size(); i-- > 0;) {
      offset_ += strides_[i];
      if (++counter_[i] < dims_[i]) return;
      offset_ -= counter_[i] * strides_[i];
      counter_[i] = 0;
    }
  }
  int64_t offset() const { return offset_; }

 private:
  const std::vector<int64_t>& dims_;
  const std::vector<int64_t>& strides_;
  std::vector<int64_t> counter_;
  int64_t offset_ = 0;
};

// Runs reducer r over every output: acc = r.init(out); r.add(acc, element, position along the
// reduced dims) in increasing position order; r.store(out, acc). Outputs are row-major over the
// kept dims, which is the order of the kept dims in the plan followed by inner_kept.
template <class T, class R>
void reduce_each(const ReducePlan& p, const T* in, const R& r) {
  const int64_t K = p.inner_kept, L = p.inner_reduced;
  const int64_t tiles = (K + kTile - 1) / kTile;
  const int64_t per_item = std::max<int64_t>(1, p.count() * std::min(K, kTile));
  parallel_for(p.groups * tiles, std::max<int64_t>(1, kParallelGrain / per_item), [&](int64_t b, int64_t e) {
    Odometer kept(p.kept_dims, p.kept_strides), red(p.reduced_dims, p.reduced_strides);
    typename R::Acc acc[kTile];
    for (int64_t item = b; item < e; ++item) {
      const int64_t g = item / tiles, k0 = item % tiles * kTile, k1 = std::min(K, k0 + kTile);
      const int64_t out0 = g * K;
      kept.seek(g);
      red.seek(0);
      for (int64_t k = k0; k < k1; ++k) acc[k - k0] = r.init(out0 + k);
      for (int64_t j = 0; j < p.outer_steps; ++j, red.next()) {
        const T* row = in + kept.offset() + red.offset();
        if (K == 1) {
          for (int64_t l = 0; l < L; ++l) r.add(acc[0], row[l], j * L + l);
        } else {  // L == 1: the innermost merged dim is kept
          for (int64_t k = k0; k < k1; ++k) r.add(acc[k - k0], row[k], j);
        }
      }
      for (int64_t k = k0; k < k1; ++k) r.store(out0 + k, acc[k - k0]);
    }
  });
}

template <class T>
auto value_of(T v) { return compute_t<T>(v); }

template <class T, class A>
T to_storage(A v) { return T(compute_t<T>(v)); }

template <class T>
struct SumReducer {
  using Acc = acc_t<T>;
  T* out;
  bool is_prod;
  Acc init(int64_t) const { return is_prod ? Acc(1) : Acc(0); }
  void add(Acc& a, T v, int64_t) const {
    if (is_prod) a *= Acc(value_of(v));
    else a += Acc(value_of(v));
  }
  void store(int64_t o, Acc a) const { out[o] = to_storage<T>(a); }
};

template <class T>
struct MeanReducer {
  T* out;
  double count;
  using Acc = double;
  Acc init(int64_t) const { return 0; }
  void add(Acc& a, T v, int64_t) const { a += double(value_of(v)); }
  void store(int64_t o, Acc a) const { out[o] = to_storage<T>(a / count); }
};

// Max or min in the element's own compute type (exact for int64); NaN wins, as in PyTorch.
template <class T, class Out>
struct ExtremeReducer {
  using C = compute_t<T>;
  using Acc = C;
  Out* out;
  bool is_max;
  Acc init(int64_t) const {
    if constexpr (std::is_floating_point_v<C>)
      return is_max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else
      return is_max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  void add(Acc& a, T v, int64_t) const {
    C x = value_of(v);
    if constexpr (std::is_floating_point_v<C>)
      if (std::isnan(x)) {
        a = x;
        return;
      }
    if (is_max ? x > a : x < a) a = x;
  }
  void store(int64_t o, Acc a) const { out[o] = Out(a); }
};

// Second pass of logsumexp: sum of exp(x - max) with the max found by the first pass.
template <class T>
struct LogSumExpReducer {
  struct Acc { double max, sum; };
  T* out;
  const double* maxes;
  Acc init(int64_t o) const { return {maxes[o], 0.0}; }
  void add(Acc& a, T v, int64_t) const { a.sum += std::exp(double(value_of(v)) - a.max); }
  void store(int64_t o, Acc a) const {
    // An infinite or NaN max is the answer itself (inf - inf would turn it into NaN).
    out[o] = to_storage<T>(std::isfinite(a.max) ? a.max + std::log(a.sum) : a.max);
  }
};

// First maximum (or minimum) along the dim; a NaN beats every number, as in PyTorch.
template <class T>
struct ArgReducer {
  using C = compute_t<T>;
  struct Acc { C best; int64_t index; };
  int64_t* out;
  bool is_max;
  Acc init(int64_t) const { return {C(0), -1}; }
  void add(Acc& a, T v, int64_t pos) const {
    C x = value_of(v);
    bool better = a.index < 0 || (is_max ? x > a.best : x < a.best);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a.best) && a.index >= 0) better = false;
      else if (std::isnan(x)) better = true;
    }
    if (better) a = {x, pos};
  }
  void store(int64_t o, Acc a) const { out[o] = a.index; }
};

std::vector<bool> reduced_mask(const KernelContext& ctx) {
  const auto& dims = ctx.inputs[0].dims;
  const int64_t rank = int64_t(dims.size());
  std::vector<bool> mask(dims.size(), false);
  auto mark = [&](int64_t d) {
    if (rank > 0) mask[size_t(d < 0 ? d + rank : d)] = true;
  };
  if (ctx.kind == OpKind::ArgMax || ctx.kind == OpKind::ArgMin) {
    mark(ctx.attrs.get_int("dim"));
  } else {
    const auto& list = ctx.attrs.get_ints("dims");
    if (list.empty()) mask.assign(dims.size(), true);
    for (int64_t d : list) mark(d);
  }
  return mask;
}

void reduce_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const HostTensor& y = ctx.outputs[0];
  const OpKind kind = ctx.kind;
  ReducePlan plan = make_plan(x.dims, reduced_mask(ctx));
  const bool no_identity = kind == OpKind::ReduceMax || kind == OpKind::ReduceMin ||
                           kind == OpKind::ArgMax || kind == OpKind::ArgMin;
  if (no_identity && plan.count() == 0 && y.numel() > 0)
    throw Error("cannot reduce over a dim of size 0: the op has no identity");

  // sum/prod of bool count in i64, so read the bools as i64.
  std::vector<int64_t> widened;
  DType in_dtype = x.dtype;
  const void* in_data = x.data;
  if (x.dtype == DType::Bool && y.dtype == DType::I64) {
    widened.resize(size_t(x.numel()));
    convert_elements(x.data, DType::Bool, widened.data(), DType::I64, widened.size());
    in_dtype = DType::I64;
    in_data = widened.data();
  }

  visit_dtype(in_dtype, [&]<class T>() {
    const T* in = static_cast<const T*>(in_data);
    T* out = static_cast<T*>(y.data);
    switch (kind) {
      case OpKind::Sum:
      case OpKind::Prod:
        reduce_each(plan, in, SumReducer<T>{out, kind == OpKind::Prod});
        break;
      case OpKind::Mean:
        if constexpr (std::is_floating_point_v<compute_t<T>>)
          reduce_each(plan, in, MeanReducer<T>{out, double(plan.count())});
        else
          throw Error("mean needs a floating-point input");
        break;
      case OpKind::ReduceMax:
      case OpKind::ReduceMin:
        reduce_each(plan, in, ExtremeReducer<T, T>{out, kind == OpKind::ReduceMax});
        break;
      case OpKind::LogSumExp:
        if constexpr (std::is_floating_point_v<compute_t<T>>) {
          std::vector<double> maxes(size_t(y.numel()));
          reduce_each(plan, in, ExtremeReducer<T, double>{maxes.data(), true});
          reduce_each(plan, in, LogSumExpReducer<T>{out, maxes.data()});
        } else {
          throw Error("logsumexp needs a floating-point input");
        }
        break;
      case OpKind::ArgMax:
      case OpKind::ArgMin:
        reduce_each(plan, in, ArgReducer<T>{y.as<int64_t>(), kind == OpKind::ArgMax});
        break;
      default:
        throw Error("reduce: unexpected op " + std::string(op_name(kind)));
    }
  });
}

// softmax / log_softmax along one dim: the input is [outer, n, inner]; each (outer, inner) line
// is shifted by its max before exp so large inputs do not overflow.
template <class T>
void softmax_lines(const KernelContext& ctx, int64_t outer, int64_t n, int64_t inner) {
  const T* in = ctx.inputs[0].as<T>();
  T* out = ctx.outputs[0].as<T>();
  const bool log_form = ctx.kind == OpKind::LogSoftmax;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t per_item = std::max<int64_t>(1, 3 * n * std::min(inner, kTile));
  parallel_for(outer * tiles, std::max<int64_t>(1, kParallelGrain / per_item), [&](int64_t b, int64_t e) {
    double max[kTile], sum[kTile], log_sum[kTile];
    std::vector<double> exps;  // exp(x - max) kept between passes when the tile is small enough
    for (int64_t item = b; item < e; ++item) {
      const int64_t o = item / tiles, k0 = item % tiles * kTile, k1 = std::min(inner, k0 + kTile);
      const int64_t base = o * n * inner, width = k1 - k0;
      const bool keep_exps = !log_form && n * width <= kSoftmaxScratch;
      if (keep_exps) exps.resize(size_t(n * width));
      auto at = [&](int64_t i, int64_t k) { return double(compute_t<T>(in[base + i * inner + k])); };
      for (int64_t k = 0; k < width; ++k) {
        max[k] = -std::numeric_limits<double>::infinity();
        sum[k] = 0;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = k0; k < k1; ++k) {
          double v = at(i, k);
          // NaN must survive as the max so the whole line becomes NaN, as in PyTorch.
          if (v > max[k - k0] || std::isnan(v)) max[k - k0] = v;
        }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = k0; k < k1; ++k) {
          double ex = std::exp(at(i, k) - max[k - k0]);
          sum[k - k0] += ex;
          if (keep_exps) exps[size_t(i * width + k - k0)] = ex;
        }
      for (int64_t k = 0; k < width; ++k) log_sum[k] = std::log(sum[k]);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = k0; k < k1; ++k) {
          double v;
          if (log_form) v = at(i, k) - max[k - k0] - log_sum[k - k0];
          else if (keep_exps) v = exps[size_t(i * width + k - k0)] / sum[k - k0];
          else v = std::exp(at(i, k) - max[k - k0]) / sum[k - k0];
          out[base + i * inner + k] = to_storage<T>(v);
        }
    }
  });
}

void softmax_kernel(const KernelContext& ctx) {
  const auto& dims = ctx.inputs[0].dims;
  const int64_t rank = int64_t(dims.size());
  int64_t dim = ctx.attrs.get_int("dim");
  if (dim < 0) dim += std::max<int64_t>(rank, 1);
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < dim ? outer : i == dim ? n : inner) *= dims[size_t(i)];
  visit_dtype(ctx.inputs[0].dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<compute_t<T>>) softmax_lines<T>(ctx, outer, n, inner);
    else throw Error(std::string(op_name(ctx.kind)) + ": needs a floating-point input");
  });
}

}  // namespace

void register_reduce(KernelTable& t) {
  for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::Prod,
                   OpKind::LogSumExp, OpKind::ArgMax, OpKind::ArgMin})
    t.set(k, reduce_kernel);
  t.set(OpKind::Softmax, softmax_kernel);
  t.set(OpKind::LogSoftmax, softmax_kernel);
}

}  // namespace kiln::reference
