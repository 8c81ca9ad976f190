// Reference kernels for the norm ops. Statistics are computed in double with two passes (mean,
// then mean squared deviation), which stays accurate when the mean is large next to the spread.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/parallel.h"
#include "core/support/error.h"

namespace kiln::reference {
namespace {

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

// Parameters are small and may be any float type: read them once as doubles. An absent one
// reads as `fill`.
std::vector<double> param(const KernelContext& ctx, size_t i, int64_t n, double fill) {
  std::vector<double> v(size_t(n), fill);
  if (i < ctx.inputs.size())
    convert_elements(ctx.inputs[i].data, ctx.inputs[i].dtype, v.data(), DType::F64, v.size());
  return v;
}

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_item));
}

// Calls fn.template operator()<T>() for a floating storage type T; integer inputs never pass the
// shape rule, so reaching one here is a bug worth a clear message.
template <class Fn>
void visit_float(const KernelContext& ctx, Fn&& fn) {
  visit_dtype(ctx.inputs[0].dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<compute_t<T>>) fn.template operator()<T>();
    else throw Error(std::string(op_name(ctx.kind)) + ": needs a floating-point input");
  });
}

struct Moments {
  double mean, rstd;
};

// Mean and 1/sqrt(biased variance + eps) of n contiguous elements.
template <class T>
Moments moments(const T* x, int64_t n, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(compute_t<T>(x[i]));
  const double mean = n ? sum / double(n) : 0.0;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(compute_t<T>(x[i])) - mean;
    sq += d * d;
  }
  const double var = n ? sq / double(n) : 0.0;
  return {mean, 1.0 / std::sqrt(var + eps)};
}

template <class T>
T normalized(T x, const Moments& m, double w, double b) {
  return T(compute_t<T>((double(compute_t<T>(x)) - m.mean) * m.rstd * w + b));
}

// x viewed as [rows, n]; each row normalized over its n elements, then scaled per element.
void layer_norm_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const int64_t rank = int64_t(x.dims.size());
  int64_t axis = ctx.attrs.get_int("axis");
  if (axis < 0) axis += rank;
  const int64_t rows = product(x.dims, 0, size_t(axis));
  const int64_t n = product(x.dims, size_t(axis), x.dims.size());
  const double eps = ctx.attrs.get_float("eps");
  const std::vector<double> w = param(ctx, 1, n, 1.0), b = param(ctx, 2, n, 0.0);
  visit_float(ctx, [&]<class T>() {
    const T* in = x.as<T>();
    T* out = ctx.outputs[0].as<T>();
    parallel_for(rows, grain_for(3 * n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = in + r * n;
        const Moments m = moments(row, n, eps);
        for (int64_t i = 0; i < n; ++i) out[r * n + i] = normalized(row[i], m, w[i], b[i]);
      }
    });
  });
}

// x viewed as [N, C, S] with per-channel running statistics.
void batch_norm_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const int64_t batch = x.dims[0], channels = x.dims[1];
  const int64_t spatial = product(x.dims, 2, x.dims.size());
  const double eps = ctx.attrs.get_float("eps");
  const std::vector<double> mean = param(ctx, 1, channels, 0.0), var = param(ctx, 2, channels, 1.0);
  const std::vector<double> w = param(ctx, 3, channels, 1.0), b = param(ctx, 4, channels, 0.0);
  visit_float(ctx, [&]<class T>() {
    const T* in = x.as<T>();
    T* out = ctx.outputs[0].as<T>();
    parallel_for(batch * channels, grain_for(spatial), [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t c = plane % channels;
        const Moments m{mean[size_t(c)], 1.0 / std::sqrt(var[size_t(c)] + eps)};
        for (int64_t i = plane * spatial; i < (plane + 1) * spatial; ++i)
          out[i] = normalized(in[i], m, w[size_t(c)], b[size_t(c)]);
      }
    });
  });
}

// x viewed as [N, G, C/G * S]: each group's block is contiguous; scale and shift per channel.
void group_norm_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const int64_t batch = x.dims[0], channels = x.dims[1];
  const int64_t spatial = product(x.dims, 2, x.dims.size());
  const int64_t groups = ctx.attrs.get_int("num_groups");
  if (groups <= 0 || channels % groups != 0)
    throw Error("num_groups " + std::to_string(groups) + " does not divide " +
                std::to_string(channels) + " channels");
  const int64_t per_group = channels / groups, block = per_group * spatial;
  const double eps = ctx.attrs.get_float("eps");
  const std::vector<double> w = param(ctx, 1, channels, 1.0), b = param(ctx, 2, channels, 0.0);
  visit_float(ctx, [&]<class T>() {
    const T* in = x.as<T>();
    T* out = ctx.outputs[0].as<T>();
    parallel_for(batch * groups, grain_for(3 * block), [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t g = item % groups, base = item * block;
        const Moments m = moments(in + base, block, eps);
        for (int64_t j = 0; j < block; ++j) {
          const size_t c = size_t(g * per_group + j / std::max<int64_t>(spatial, 1));
          out[base + j] = normalized(in[base + j], m, w[c], b[c]);
        }
      }
    });
  });
}

}  // namespace

void register_norm(KernelTable& t) {
  t.set(OpKind::LayerNorm, layer_norm_kernel);
  t.set(OpKind::BatchNorm, batch_norm_kernel);
  t.set(OpKind::GroupNorm, group_norm_kernel);
}

}  // namespace kiln::reference
