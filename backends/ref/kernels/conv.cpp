// Reference kernels for the conv ops: conv (im2col + a GEMM: the AVX2 tile of conv_gemm.h where the
// CPU has it, else the blocked GEMM; depthwise as a direct loop), conv_transpose (GEMM + col2im),
// max/avg pooling, global average pooling, and the gradients of max pooling and of conv's weight
// (a direct loop per weight element, summed in double). 1-d inputs run as 2-d with
// height 1; f16/bf16 convolutions compute in float copies; channels-last conv and pooling run on
// channels-first copies.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/ref/ref_kernel.h"
#include "backends/ref/kernels/conv_gemm.h"
#include "backends/ref/kernels/gemm_kernel.h"
#include "backends/ref/parallel.h"
#include "core/support/error.h"

namespace kiln::reference {
namespace {

// Input, output and window geometry, always 2-d: a 1-d op has h = oh = kh = 1.
struct Geometry {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t o = 1, oh = 1, ow = 1;       // output channels and spatial size
  int64_t kh = 1, kw = 1;              // kernel
  int64_t sh = 1, sw = 1;              // stride
  int64_t ph = 0, pw = 0, ph_end = 0, pw_end = 0;
  int64_t dh = 1, dw = 1;  // dilation
  int64_t groups = 1;
};

// An attribute with one value per spatial dim (times per_dim); empty means all `fill`.
std::vector<int64_t> spatial_attr(const AttrMap& attrs, const std::string& name, size_t spatial,
                                  size_t per_dim, int64_t fill) {
  std::vector<int64_t> v = attrs.has(name) ? attrs.get_ints(name) : std::vector<int64_t>{};
  if (v.empty()) v.assign(spatial * per_dim, fill);
  return v;
}

// Fills the window attributes shared by every op of the family from the window's input `x` and
// output `y`; kernel sizes come from the weight (conv) or the "kernel" attribute (pools).
Geometry geometry(const AttrMap& attrs, const HostTensor& x, const HostTensor& y, const std::vector<int64_t>& kernel) {
  const size_t spatial = x.dims.size() - 2;
  const auto stride = spatial_attr(attrs, "stride", spatial, 1, 1);
  const auto pads = spatial_attr(attrs, "padding", spatial, 2, 0);
  const auto dilation = spatial_attr(attrs, "dilation", spatial, 1, 1);
  Geometry g;
  g.n = x.dims[0];
  g.c = x.dims[1];
  g.o = y.dims[1];
  g.w = x.dims.back();
  g.ow = y.dims.back();
  g.kw = kernel.back();
  g.sw = stride.back();
  g.pw = pads[spatial - 1];
  g.pw_end = pads[2 * spatial - 1];
  g.dw = dilation.back();
  if (spatial == 2) {
    g.h = x.dims[2];
    g.oh = y.dims[2];
    g.kh = kernel[0];
    g.sh = stride[0];
    g.ph = pads[0];
    g.ph_end = pads[2];
    g.dh = dilation[0];
  }
  if (attrs.has("groups")) g.groups = attrs.get_int("groups");
  return g;
}

Geometry geometry(const KernelContext& ctx, const std::vector<int64_t>& kernel) {
  return geometry(ctx.attrs, ctx.inputs[0], ctx.outputs[0], kernel);
}

std::vector<int64_t> weight_kernel(const HostTensor& weight) {
  return std::vector<int64_t>(weight.dims.begin() + 2, weight.dims.end());
}

// y[n, o, :, :] = bias[o] (or 0) for every plane, before the products accumulate into it.
template <class T>
void fill_bias(const Geometry& g, const T* bias, T* y) {
  const int64_t plane = g.oh * g.ow;
  for (int64_t p = 0; p < g.n * g.o; ++p)
    std::fill(y + p * plane, y + (p + 1) * plane, bias ? bias[p % g.o] : T(0));
}

// One (image, group, output-row block, output-channel block [o0, o1) of the group) of a
// convolution: gathers the receptive fields into a column matrix [C/groups * kh * kw, rows * ow]
// and multiplies the block's weights by it.
template <class T>
void conv_task(const Geometry& g, const T* x, const T* w, T* y, int64_t n, int64_t group,
               int64_t oh0, int64_t oh1, int64_t o0, int64_t o1) {
  const int64_t cg = g.c / g.groups, og = o1 - o0;
  const int64_t ckk = cg * g.kh * g.kw;
  const int64_t positions = (oh1 - oh0) * g.ow;
  const T* x_group = x + (n * g.c + group * cg) * g.h * g.w;
  const int64_t first_o = group * (g.o / g.groups) + o0;
  T* y_block = y + ((n * g.o + first_o) * g.oh + oh0) * g.ow;
  MatrixView<T> weights{w + first_o * ckk, ckk, 1};
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                         g.pw == 0 && g.oh == g.h && g.ow == g.w;
  // y_block already holds the bias: the product accumulates into it.
  auto product = [&](const T* cols, int64_t ld) {
#if KILN_CONV_GEMM_AVX2
    if constexpr (std::is_same_v<T, float>)
      if (conv_gemm::available())
        return conv_gemm::gemm_accumulate(og, positions, ckk, weights.data, ckk, cols, ld, y_block,
                                          g.oh * g.ow);
#endif
    gemm_serial(og, positions, ckk, T(1), weights, MatrixView<T>{cols, ld, 1}, true, y_block,
                g.oh * g.ow);
  };
  if (pointwise) return product(x_group + oh0 * g.w, g.h * g.w);  // the input planes are the columns
  thread_local std::vector<T> buffer;
  if (buffer.size() < size_t(ckk * positions)) buffer.resize(size_t(ckk * positions));
  T* col = buffer.data();
  for (int64_t c = 0; c < cg; ++c) {
    const T* plane = x_group + c * g.h * g.w;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * positions;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* dst = row + (oh - oh0) * g.ow;
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) {
            std::fill(dst, dst + g.ow, T(0));
            continue;
          }
          const T* src = plane + ih * g.w;
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t iw = ow * g.sw - g.pw + j * g.dw;
            dst[ow] = (iw >= 0 && iw < g.w) ? src[iw] : T(0);
          }
        }
      }
    }
  }
  product(col, positions);
}

// Depthwise convolution (one input channel per group, MobileNet's 3x3 layers): im2col would build
// a 9-row column matrix for a one-row product, so each output row is accumulated directly, one tap
// at a time over the range of pixels where the tap is inside the input (a unit-stride loop that
// vectorizes when the stride is 1).
template <class T>
void depthwise_forward(const Geometry& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t og = g.o / g.groups;  // channel multiplier: output o reads input channel o / og
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, g.ow * g.kh * g.kw));
  parallel_for(g.n * g.o * g.oh, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t plane = r / g.oh, oh = r % g.oh;
      const int64_t n = plane / g.o, o = plane % g.o;
      const T* in = x + (n * g.c + o / og) * g.h * g.w;
      const T* taps = w + o * g.kh * g.kw;
      T* out = y + (plane * g.oh + oh) * g.ow;
      std::fill(out, out + g.ow, bias ? bias[o] : T(0));
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t ih = oh * g.sh - g.ph + i * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        const T* src = in + ih * g.w;
        for (int64_t j = 0; j < g.kw; ++j) {
          const T tap = taps[i * g.kw + j];
          const int64_t off = j * g.dw - g.pw;  // input column of output column ow: ow * sw + off
          const int64_t lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
          const int64_t hi = g.w - 1 - off < 0 ? 0 : std::min(g.ow, (g.w - 1 - off) / g.sw + 1);
          if (g.sw == 1) {
            const T* s = src + off;
            for (int64_t ow = lo; ow < hi; ++ow) out[ow] += tap * s[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) out[ow] += tap * src[ow * g.sw + off];
          }
        }
      }
    }
  });
}

template <class T>
void conv_forward(const Geometry& g, const T* x, const T* w, const T* bias, T* y) {
  if (g.groups > 1 && g.c == g.groups) return depthwise_forward(g, x, w, bias, y);
  fill_bias(g, bias, y);
  const int64_t ckk = (g.c / g.groups) * g.kh * g.kw;
  // Row blocks keep the column matrix near 1 MiB and give every thread a few tasks.
  int64_t rows =
      std::clamp<int64_t>((int64_t(1) << 18) / std::max<int64_t>(1, ckk * g.ow), 1, g.oh);
  const int64_t images = g.n * g.groups, og = g.o / g.groups;
  const int64_t want_tasks = 4 * num_threads();
  const int64_t want_blocks = (want_tasks + images - 1) / images;
  // A block narrower than ~64 pixels would waste the GEMM's column tile and repack the weights
  // for little work: small late layers (7x7) split their output channels instead.
  const int64_t min_rows = std::min(g.oh, (64 + g.ow - 1) / g.ow);
  rows = std::min(rows, std::max(min_rows, (g.oh + want_blocks - 1) / want_blocks));
  const int64_t blocks = (g.oh + rows - 1) / rows;
  int64_t channel_blocks = std::max<int64_t>(1, (want_tasks + images * blocks - 1) / (images * blocks));
  channel_blocks = std::min(channel_blocks, std::max<int64_t>(1, og / 24));
  const int64_t chunk = ((og + channel_blocks - 1) / channel_blocks + 5) / 6 * 6;  // whole 6-row strips
  channel_blocks = (og + chunk - 1) / chunk;
  parallel_for(images * blocks * channel_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t cb = t % channel_blocks, block = (t / channel_blocks) % blocks;
      const int64_t image = t / (channel_blocks * blocks);
      const int64_t oh0 = block * rows;
      conv_task(g, x, w, y, image / g.groups, image % g.groups, oh0, std::min(g.oh, oh0 + rows),
                cb * chunk, std::min(og, (cb + 1) * chunk));
    }
  });
}

// Transposed convolution: per (image, group), cols = W_g^T x_g ([O/groups * kh * kw, h * w]),
// then each column entry is scattered into the output position its kernel tap reaches (col2im).
template <class T>
void conv_transpose_forward(const Geometry& g, const T* x, const T* w, const T* bias, T* y) {
  fill_bias(g, bias, y);
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t taps = og * g.kh * g.kw, pixels = g.h * g.w;
  std::vector<T> cols(size_t(taps * pixels));
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      // weight is [C, O/groups, kh, kw]: tap r of input channel c sits at (group*cg + c)*taps + r.
      MatrixView<T> wt{w + group * cg * taps, 1, taps};
      MatrixView<T> xg{x + (n * g.c + group * cg) * pixels, pixels, 1};
      gemm_batched<T>({{wt, xg, cols.data(), pixels}}, taps, pixels, cg, T(1), false);
      T* y_group = y + (n * g.o + group * og) * g.oh * g.ow;
      // Each task owns whole output channels, so the scatter needs no synchronization.
      parallel_for(og, 1, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          T* plane = y_group + o * g.oh * g.ow;
          for (int64_t i = 0; i < g.kh; ++i) {
            for (int64_t j = 0; j < g.kw; ++j) {
              const T* src = cols.data() + ((o * g.kh + i) * g.kw + j) * pixels;
              for (int64_t ih = 0; ih < g.h; ++ih) {
                const int64_t oh = ih * g.sh - g.ph + i * g.dh;
                if (oh < 0 || oh >= g.oh) continue;
                for (int64_t iw = 0; iw < g.w; ++iw) {
                  const int64_t ow = iw * g.sw - g.pw + j * g.dw;
                  if (ow >= 0 && ow < g.ow) plane[oh * g.ow + ow] += src[ih * g.w + iw];
                }
              }
            }
          }
        }
      });
    }
  }
}

std::vector<float> to_float(const HostTensor& t) {
  std::vector<float> v(size_t(t.numel()));
  convert_elements(t.data, t.dtype, v.data(), DType::F32, v.size());
  return v;
}

// Runs a conv-like computation in the output's dtype: f32/f64 directly, f16/bf16 through float.
template <class Fn>
void run_conv(const KernelContext& ctx, Fn compute) {
  const HostTensor& y = ctx.outputs[0];
  const bool has_bias = ctx.inputs.size() == 3;
  if (y.dtype == DType::F32 || y.dtype == DType::F64) {
    visit_dtype(y.dtype, [&]<class T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
        compute(ctx.inputs[0].as<const T>(), ctx.inputs[1].as<const T>(),
                has_bias ? ctx.inputs[2].as<const T>() : nullptr, y.as<T>());
    });
    return;
  }
  if (y.dtype != DType::F16 && y.dtype != DType::BF16)
    throw Error("convolution needs a floating-point dtype, got " +
                std::string(dtype_name(y.dtype)));
  std::vector<float> x = to_float(ctx.inputs[0]), w = to_float(ctx.inputs[1]);
  std::vector<float> bias = has_bias ? to_float(ctx.inputs[2]) : std::vector<float>{};
  std::vector<float> out(size_t(y.numel()));
  compute(x.data(), w.data(), has_bias ? bias.data() : nullptr, out.data());
  convert_elements(out.data(), DType::F32, y.data, y.dtype, out.size());
}

void conv_kernel(const KernelContext& ctx) {
  const Geometry g = geometry(ctx, weight_kernel(ctx.inputs[1]));
  run_conv(ctx, [&](const auto* x, const auto* w, const auto* bias, auto* y) {
    conv_forward(g, x, w, bias, y);
  });
}

void conv_transpose_kernel(const KernelContext& ctx) {
  const Geometry g = geometry(ctx, weight_kernel(ctx.inputs[1]));
  run_conv(ctx, [&](const auto* x, const auto* w, const auto* bias, auto* y) {
    conv_transpose_forward(g, x, w, bias, y);
  });
}

// dw[o, c, i, j] = sum over n, oh, ow of g[n, o, oh, ow] * x[n, group * cg + c, oh * sh - ph + i * dh,
// ow * sw - pw + j * dw]: per weight element, the taps' columns inside the input in one unit-stride
// (when sw is 1) run per output row.
template <class T>
void conv_weight_grad_compute(const Geometry& geo, const T* x, const T* g, T* dw) {
  const int64_t cg = geo.c / geo.groups, og = geo.o / geo.groups;
  parallel_for(geo.o * cg, 1, [&](int64_t begin, int64_t end) {
    for (int64_t oc = begin; oc < end; ++oc) {
      const int64_t o = oc / cg, c = (o / og) * cg + oc % cg;
      for (int64_t i = 0; i < geo.kh; ++i)
        for (int64_t j = 0; j < geo.kw; ++j) {
          const int64_t off = j * geo.dw - geo.pw;  // input column of output column ow: ow * sw + off
          const int64_t lo = off >= 0 ? 0 : (-off + geo.sw - 1) / geo.sw;
          const int64_t hi = geo.w - 1 - off < 0 ? 0 : std::min(geo.ow, (geo.w - 1 - off) / geo.sw + 1);
          double sum = 0;
          for (int64_t n = 0; n < geo.n; ++n)
            for (int64_t oh = 0; oh < geo.oh; ++oh) {
              const int64_t ih = oh * geo.sh - geo.ph + i * geo.dh;
              if (ih < 0 || ih >= geo.h) continue;
              const T* in = x + ((n * geo.c + c) * geo.h + ih) * geo.w;
              const T* grad = g + ((n * geo.o + o) * geo.oh + oh) * geo.ow;
              for (int64_t ow = lo; ow < hi; ++ow) sum += double(grad[ow]) * double(in[ow * geo.sw + off]);
            }
          dw[(oc * geo.kh + i) * geo.kw + j] = T(sum);
        }
    }
  });
}

void conv_weight_grad_kernel(const KernelContext& ctx) {
  // The conv's output is the gradient g, input 1.
  const Geometry geo = geometry(ctx.attrs, ctx.inputs[0], ctx.inputs[1], ctx.attrs.get_ints("kernel"));
  run_conv(ctx, [&](const auto* x, const auto* g, const auto*, auto* dw) { conv_weight_grad_compute(geo, x, g, dw); });
}

// Calls row(plane, oh) for every output row, threaded; planes are the N * C channel images.
template <class F>
void for_each_output_row(const Geometry& g, F row) {
  const int64_t rows = g.n * g.c * g.oh;
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.ow * g.kh * g.kw));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) row(r / g.oh, r % g.oh);
  });
}

void max_pool_kernel(const KernelContext& ctx) {
  const Geometry g = geometry(ctx, ctx.attrs.get_ints("kernel"));
  visit_dtype(ctx.inputs[0].dtype, [&]<class T>() {
    using C = compute_t<T>;
    const T* x = ctx.inputs[0].as<const T>();
    T* y = ctx.outputs[0].as<T>();
    for_each_output_row(g, [&](int64_t plane, int64_t oh) {
      const T* in = x + plane * g.h * g.w;
      T* out = y + (plane * g.oh + oh) * g.ow;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        // Padding never wins: only taps inside the input are compared.
        C best = std::numeric_limits<C>::lowest();
        if constexpr (std::numeric_limits<C>::has_infinity)
          best = -std::numeric_limits<C>::infinity();
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.ph + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iw = ow * g.sw - g.pw + j * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const C v = C(in[ih * g.w + iw]);
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(v) || v > best) best = v;  // NaN propagates, as in PyTorch
              if (std::isnan(best)) break;
            } else if (v > best) {
              best = v;
            }
          }
        }
        out[ow] = T(best);
      }
    });
  });
}

// max_pool's gradient: each window's output gradient goes to the first tap (row-major) holding
// the window's maximum, padding counting as -inf and the first NaN winning, as the lowering's
// argmax picks it. Planes run in parallel; each sums its windows' shares in the compute type.
void max_pool_grad_kernel(const KernelContext& ctx) {
  const Geometry g = geometry(ctx.attrs, ctx.inputs[0], ctx.inputs[1], ctx.attrs.get_ints("kernel"));
  visit_dtype(ctx.inputs[0].dtype, [&]<class T>() {
    using C = compute_t<T>;
    if constexpr (!std::is_floating_point_v<C>) {
      throw Error("max_pool_grad: needs floating-point operands");  // the shape rule says so first
    } else {
      const T* x = ctx.inputs[0].as<const T>();
      const T* dy = ctx.inputs[1].as<const T>();
      T* dx = ctx.outputs[0].as<T>();
      const int64_t plane_size = g.h * g.w;
      parallel_for(g.n * g.c, 1, [&](int64_t begin, int64_t end) {
        std::vector<C> sums(static_cast<size_t>(plane_size));
        for (int64_t plane = begin; plane < end; ++plane) {
          std::fill(sums.begin(), sums.end(), C(0));
          const T* in = x + plane * plane_size;
          const T* grad = dy + plane * g.oh * g.ow;
          for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
              const int64_t top = oh * g.sh - g.ph, left = ow * g.sw - g.pw;
              if (top >= 0 && left >= 0 && top + (g.kh - 1) * g.dh < g.h && left + (g.kw - 1) * g.dw < g.w) {
                // Inside the input (most windows): no tap is padding.
                const T* window = in + top * g.w + left;
                C best = C(window[0]);
                int64_t at = 0;  // the winning tap's offset from the window's first
                for (int64_t i = 0; i < g.kh; ++i)
                  for (int64_t j = 0; j < g.kw; ++j) {
                    const int64_t offset = i * g.dh * g.w + j * g.dw;
                    const C v = C(window[offset]);
                    if (!std::isnan(best) && (v > best || std::isnan(v))) {
                      best = v;
                      at = offset;
                    }
                  }
                sums[size_t(top * g.w + left + at)] += C(grad[oh * g.ow + ow]);
                continue;
              }
              C best = -std::numeric_limits<C>::infinity();
              int64_t at = -1;  // the winning tap's offset in the plane; -1 for a padded one
              for (int64_t i = 0; i < g.kh; ++i) {
                const int64_t ih = oh * g.sh - g.ph + i * g.dh;
                for (int64_t j = 0; j < g.kw; ++j) {
                  const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                  const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
                  const C v = inside ? C(in[ih * g.w + iw]) : -std::numeric_limits<C>::infinity();
                  if ((i == 0 && j == 0) || (!std::isnan(best) && (v > best || std::isnan(v)))) {
                    best = v;
                    at = inside ? ih * g.w + iw : -1;
                  }
                }
              }
              if (at >= 0) sums[size_t(at)] += C(grad[oh * g.ow + ow]);
            }
          for (int64_t i = 0; i < plane_size; ++i) dx[plane * plane_size + i] = T(sums[size_t(i)]);
        }
      });
    }
  });
}

void avg_pool_kernel(const KernelContext& ctx) {
  const Geometry g = geometry(ctx, ctx.attrs.get_ints("kernel"));
  const bool include_pad = ctx.attrs.get_bool("count_include_pad");
  visit_dtype(ctx.inputs[0].dtype, [&]<class T>() {
    using C = compute_t<T>;
    const T* x = ctx.inputs[0].as<const T>();
    T* y = ctx.outputs[0].as<T>();
    for_each_output_row(g, [&](int64_t plane, int64_t oh) {
      const T* in = x + plane * g.h * g.w;
      T* out = y + (plane * g.oh + oh) * g.ow;
      // Windows are clipped to the padded input first (what count_include_pad counts), then
      // to the input itself (what is summed), as PyTorch does in ceil_mode.
      int64_t h0 = oh * g.sh - g.ph, h1 = std::min(h0 + g.kh, g.h + g.ph_end);
      const int64_t padded_h = h1 - h0;
      h0 = std::max<int64_t>(h0, 0);
      h1 = std::min(h1, g.h);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        int64_t w0 = ow * g.sw - g.pw, w1 = std::min(w0 + g.kw, g.w + g.pw_end);
        const int64_t padded_w = w1 - w0;
        w0 = std::max<int64_t>(w0, 0);
        w1 = std::min(w1, g.w);
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += double(C(in[ih * g.w + iw]));
        const int64_t count = include_pad ? padded_h * padded_w : (h1 - h0) * (w1 - w0);
        out[ow] = T(C(sum / double(std::max<int64_t>(count, 1))));
      }
    });
  });
}

void global_avg_pool_kernel(const KernelContext& ctx) {
  const HostTensor& x = ctx.inputs[0];
  const int64_t planes = x.dims[0] * x.dims[1];
  const int64_t size = planes ? x.numel() / planes : 0;
  visit_dtype(x.dtype, [&]<class T>() {
    using C = compute_t<T>;
    const T* in = x.as<const T>();
    T* out = ctx.outputs[0].as<T>();
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, size));
    parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += double(C(in[p * size + i]));
        out[p] = T(C(size ? sum / double(size) : std::nan("")));
      }
    });
  });
}

// Copies [N, *spatial, C] `from` into [N, C, *spatial] `to` (to_first), or back.
void move_channels(const HostTensor& from, const HostTensor& to, bool to_first) {
  const std::vector<int64_t>& last = to_first ? from.dims : to.dims;
  const int64_t n = last.front(), c = last.back(), planes = n ? from.numel() / (n * std::max<int64_t>(c, 1)) : 0;
  const size_t size = dtype_size(from.dtype);
  const auto* src = static_cast<const uint8_t*>(from.data);
  auto* dst = static_cast<uint8_t*>(to.data);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t k = 0; k < c; ++k) {
        const int64_t at_last = (i * planes + p) * c + k, at_first = (i * c + k) * planes + p;
        std::memcpy(dst + size * size_t(to_first ? at_first : at_last), src + size * size_t(to_first ? at_last : at_first), size);
      }
}

// A conv or window pool with channels-last activations runs channels-first on copies.
template <Kernel kernel>
void any_layout(const KernelContext& ctx) {
  if (!is_channels_last(ctx.attrs)) return kernel(ctx);
  KernelContext first{ctx.kind, ctx.attrs, ctx.inputs, ctx.outputs};
  HostTensor& x = first.inputs[0];
  HostTensor& y = first.outputs[0];
  x.dims = channels_first_dims(x.dims);
  y.dims = channels_first_dims(y.dims);
  std::vector<uint8_t> x_copy(size_t(x.numel()) * dtype_size(x.dtype)), y_copy(size_t(y.numel()) * dtype_size(y.dtype));
  x.data = x_copy.data();
  y.data = y_copy.data();
  move_channels(ctx.inputs[0], x, true);
  kernel(first);
  move_channels(y, ctx.outputs[0], false);
}

}  // namespace

void register_conv(KernelTable& t) {
  t.set(OpKind::Conv, any_layout<conv_kernel>);
  t.set(OpKind::ConvTranspose, conv_transpose_kernel);
  t.set(OpKind::MaxPool, any_layout<max_pool_kernel>);
  t.set(OpKind::AvgPool, any_layout<avg_pool_kernel>);
  t.set(OpKind::GlobalAvgPool, global_avg_pool_kernel);
  t.set(OpKind::MaxPoolGrad, max_pool_grad_kernel);
  t.set(OpKind::ConvWeightGrad, conv_weight_grad_kernel);
}

}  // namespace kiln::reference
