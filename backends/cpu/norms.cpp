// The cpu device's eager layer, batch and group norms on f32, in vectorized loops. The reference
// kernels (the ref device's, the oracle) add and scale one element at a time in f64 through
// generic dtype code, which no compiler vectorizes.
//  - The same two passes as the reference (the mean, then the mean squared deviation), and in f64
//    like it, so a large mean next to a small spread stays accurate (in f32, a mean of 1000 is
//    off by 3e-5 and shifts every output of a row with spread 0.3 by 1e-4).
//  - Each sum adds 16 partial sums, which vectorize.
#include "backends/cpu/norms.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "backends/cpu/vector_math.h"
#include "backends/ref/host_memory.h"
#include "backends/ref/parallel.h"
#include "core/ir/shape.h"

namespace kiln::cpu {
namespace {

constexpr int kParts = 16;

// The sum of term(i) for i < n, added in kParts partial sums, which vectorize. Inlined into each
// ISA's clone of its caller.
template <class Term>
[[gnu::always_inline]] inline double sum_in_parts(int64_t n, Term term) {
  double parts[kParts] = {};
  int64_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (int k = 0; k < kParts; ++k) parts[k] += term(i + k);
  for (; i < n; ++i) parts[0] += term(i);
  double sum = 0;
  for (int k = 0; k < kParts; ++k) sum += parts[k];
  return sum;
}

KILN_CPU_CLONES double row_sum(const float* __restrict x, int64_t n) {
  return sum_in_parts(n, [x](int64_t i) { return double(x[i]); });
}

KILN_CPU_CLONES double row_squared_deviation(const float* __restrict x, int64_t n, double mean) {
  return sum_in_parts(n, [x, mean](int64_t i) {
    const double d = double(x[i]) - mean;
    return d * d;
  });
}

// (x - mean) * rstd * w + b in f64, w and b absent as nullptr (1 and 0).
KILN_CPU_CLONES void normalize_row(const float* __restrict x, float* __restrict y, int64_t n, double mean,
                                   double rstd, const float* __restrict w, const float* __restrict b) {
  if (w && b)
    for (int64_t i = 0; i < n; ++i) y[i] = float((double(x[i]) - mean) * rstd * double(w[i]) + double(b[i]));
  else if (w)
    for (int64_t i = 0; i < n; ++i) y[i] = float((double(x[i]) - mean) * rstd * double(w[i]));
  else if (b)
    for (int64_t i = 0; i < n; ++i) y[i] = float((double(x[i]) - mean) * rstd + double(b[i]));
  else
    for (int64_t i = 0; i < n; ++i) y[i] = float((double(x[i]) - mean) * rstd);
}

// (x - mean) * rstd * w + b in f64 with one w and b for the whole span (a channel's plane).
KILN_CPU_CLONES void normalize_plane(const float* __restrict x, float* __restrict y, int64_t n, double mean,
                                     double rstd, double w, double b) {
  for (int64_t i = 0; i < n; ++i) y[i] = float((double(x[i]) - mean) * rstd * w + b);
}

bool is_f32_row_major(const BufferView& v) { return v.dtype == DType::F32 && v.row_major() && v.offset == 0; }

// A norm this file runs: every operand contiguous f32, the output the input's shape and not its
// buffer (the loops' pointers are restrict).
bool runs_here(const OpRun& run) {
  if (run.outputs.size() != 1 || run.inputs.empty()) return false;
  for (const BufferView& v : run.inputs)
    if (!is_f32_row_major(v)) return false;
  const BufferView& x = run.inputs[0];
  if (!is_f32_row_major(run.outputs[0]) || run.outputs[0].dims != x.dims) return false;
  return reference::host_data(*x.buffer) != reference::host_data(*run.outputs[0].buffer);
}

const float* input_data(const OpRun& run, size_t i) {
  return i < run.inputs.size() ? static_cast<const float*>(reference::host_data(*run.inputs[i].buffer)) : nullptr;
}

// Per-channel parameters of x [N, C, ...] (input i, absent: nullptr), each holding C values.
bool per_channel(const OpRun& run, size_t first, size_t last, int64_t channels) {
  for (size_t i = first; i <= last && i < run.inputs.size(); ++i)
    if (numel(run.inputs[i].dims) != channels) return false;
  return true;
}

bool run_layer_norm(const OpRun& run) {
  const BufferView& x = run.inputs[0];
  const int64_t rank = int64_t(x.dims.size());
  int64_t axis = run.attrs.get_int("axis");
  if (axis < 0) axis += rank;
  const std::span<const int64_t> dims(x.dims);
  const int64_t rows = numel(dims.first(size_t(axis))), n = numel(dims.subspan(size_t(axis)));
  for (size_t i = 1; i < run.inputs.size(); ++i)
    if (numel(run.inputs[i].dims) != n) return false;  // a parameter that broadcasts keeps the reference
  const float* in = input_data(run, 0);
  float* out = static_cast<float*>(reference::host_data(*run.outputs[0].buffer));
  const float* w = input_data(run, 1);
  const float* b = input_data(run, 2);
  if (rows == 0 || n == 0) return true;
  const double eps = run.attrs.get_float("eps");
  reference::parallel_for(rows, std::max<int64_t>(1, reference::kParallelGrain / n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = in + r * n;
      const double mean = row_sum(row, n) / double(n);
      const double var = row_squared_deviation(row, n, mean) / double(n);
      const double rstd = 1.0 / std::sqrt(var + eps);
      normalize_row(row, out + r * n, n, mean, rstd, w, b);
    }
  });
  return true;
}

// x [N, C, S...] with running statistics: inputs mean, var, and optional weight and bias, per channel.
bool run_batch_norm(const OpRun& run) {
  const BufferView& x = run.inputs[0];
  if (x.dims.size() < 2 || run.inputs.size() < 3) return false;
  const int64_t batch = x.dims[0], channels = x.dims[1];
  const int64_t spatial = numel(std::span<const int64_t>(x.dims).subspan(2));
  if (!per_channel(run, 1, 4, channels)) return false;
  const float* in = input_data(run, 0);
  float* out = static_cast<float*>(reference::host_data(*run.outputs[0].buffer));
  const float *mean = input_data(run, 1), *var = input_data(run, 2), *w = input_data(run, 3), *b = input_data(run, 4);
  const double eps = run.attrs.get_float("eps");
  const int64_t planes = batch * channels;
  if (planes == 0 || spatial == 0) return true;
  const int64_t grain = std::max<int64_t>(1, reference::kParallelGrain / spatial);
  reference::parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % channels;
      normalize_plane(in + plane * spatial, out + plane * spatial, spatial, double(mean[c]),
                      1.0 / std::sqrt(double(var[c]) + eps), w ? double(w[c]) : 1.0, b ? double(b[c]) : 0.0);
    }
  });
  return true;
}

// x [N, C, S...] in num_groups groups of C / num_groups channels, each group's block contiguous;
// optional weight and bias per channel.
bool run_group_norm(const OpRun& run) {
  const BufferView& x = run.inputs[0];
  if (x.dims.size() < 2) return false;
  const int64_t batch = x.dims[0], channels = x.dims[1], groups = run.attrs.get_int("num_groups");
  const int64_t spatial = numel(std::span<const int64_t>(x.dims).subspan(2));
  if (groups <= 0 || channels % groups != 0) return false;  // the reference names the mistake
  if (!per_channel(run, 1, 2, channels)) return false;
  const float* in = input_data(run, 0);
  float* out = static_cast<float*>(reference::host_data(*run.outputs[0].buffer));
  const float *w = input_data(run, 1), *b = input_data(run, 2);
  const double eps = run.attrs.get_float("eps");
  const int64_t per_group = channels / groups, block = per_group * spatial, items = batch * groups;
  if (items == 0 || block == 0) return true;
  const int64_t grain = std::max<int64_t>(1, reference::kParallelGrain / block);
  reference::parallel_for(items, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const float* group = in + item * block;
      const double mean = row_sum(group, block) / double(block);
      const double rstd = 1.0 / std::sqrt(row_squared_deviation(group, block, mean) / double(block) + eps);
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t c = (item % groups) * per_group + k;
        normalize_plane(group + k * spatial, out + item * block + k * spatial, spatial, mean, rstd,
                        w ? double(w[c]) : 1.0, b ? double(b[c]) : 0.0);
      }
    }
  });
  return true;
}

}  // namespace

bool run_norm(const OpRun& run) {
  if (!runs_here(run)) return false;
  switch (run.kind) {
    case OpKind::LayerNorm: return run_layer_norm(run);
    case OpKind::BatchNorm: return run_batch_norm(run);
    case OpKind::GroupNorm: return run_group_norm(run);
    default: return false;
  }
}

}  // namespace kiln::cpu
