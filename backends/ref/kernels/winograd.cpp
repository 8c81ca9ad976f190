// Reference kernels of the Winograd F(2x2, 3x3) ops (core/ir/ops/winograd.cpp): each transform as
// its matrix products written out with the dense matrices of core/ir/winograd_matrices.h, in double, one
// tile at a time. The oracle for the lowerings, which read only the nonzeros.
#include <string>

#include "backends/ref/parallel.h"
#include "backends/ref/ref_kernel.h"
#include "core/ir/winograd_matrices.h"
#include "core/support/error.h"

namespace kiln::reference {
namespace {

using namespace kiln::winograd;

template <class T>
void with_float(const KernelContext& ctx, const char* op, T fn) {
  switch (ctx.inputs[0].dtype) {
    case DType::F32: fn.template operator()<float>(); return;
    case DType::F64: fn.template operator()<double>(); return;
    default: throw Error(std::string(op) + ": needs an f32 or f64 operand");  // the shape rule says so first
  }
}

// U[4i + j, c, o] = sum over (k, l) of G[i][k] G[j][l] w[o, c, k, l].
void weights_kernel(const KernelContext& ctx) {
  const auto& d = ctx.inputs[0].dims;
  const int64_t outs = d[0], channels = d[1];
  with_float(ctx, "winograd_weights", [&]<class T>() {
    const T* w = ctx.inputs[0].as<const T>();
    T* u = ctx.outputs[0].as<T>();
    for (int64_t o = 0; o < outs; ++o)
      for (int64_t c = 0; c < channels; ++c) {
        const T* g = w + (o * channels + c) * kTaps * kTaps;
        for (int i = 0; i < kTile; ++i)
          for (int j = 0; j < kTile; ++j) {
            double sum = 0;
            for (int k = 0; k < kTaps; ++k)
              for (int l = 0; l < kTaps; ++l) sum += kG[i][k] * kG[j][l] * double(g[k * kTaps + l]);
            u[((i * kTile + j) * channels + c) * outs + o] = T(sum);
          }
      }
  });
}

// V[4i + j, n, th, tw, c] = sum over (a, b) of Bt[i][a] Bt[j][b] x[n, c, 2th + a - top, 2tw + b - left],
// zero outside the input.
void input_kernel(const KernelContext& ctx) {
  const auto& xd = ctx.inputs[0].dims;
  const auto& vd = ctx.outputs[0].dims;
  const int64_t batch = xd[0], channels = xd[1], height = xd[2], width = xd[3];
  const int64_t tiles_h = vd[2], tiles_w = vd[3];
  const std::vector<int64_t> pads = ctx.attrs.get_ints("padding");
  const int64_t tile_stride = batch * tiles_h * tiles_w * channels;  // between the 16 positions
  with_float(ctx, "winograd_input", [&]<class T>() {
    const T* x = ctx.inputs[0].as<const T>();
    T* v = ctx.outputs[0].as<T>();
    parallel_for(batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / channels, c = plane % channels;
        for (int64_t th = 0; th < tiles_h; ++th)
          for (int64_t tw = 0; tw < tiles_w; ++tw) {
            double d[kTile][kTile];
            for (int a = 0; a < kTile; ++a)
              for (int b = 0; b < kTile; ++b) {
                const int64_t h = 2 * th + a - pads[0], w = 2 * tw + b - pads[1];
                const bool inside = h >= 0 && h < height && w >= 0 && w < width;
                d[a][b] = inside ? double(x[((n * channels + c) * height + h) * width + w]) : 0.0;
              }
            const int64_t at = ((n * tiles_h + th) * tiles_w + tw) * channels + c;
            for (int i = 0; i < kTile; ++i)
              for (int j = 0; j < kTile; ++j) {
                double sum = 0;
                for (int a = 0; a < kTile; ++a)
                  for (int b = 0; b < kTile; ++b) sum += kBt[i][a] * kBt[j][b] * d[a][b];
                v[(i * kTile + j) * tile_stride + at] = T(sum);
              }
          }
      }
    });
  });
}

// Y[n, o, 2th + r, 2tw + s] = sum over (i, j) of At[r][i] At[s][j] M[4i + j, n, th, tw, o], for the
// outputs inside the attribute size.
void output_kernel(const KernelContext& ctx) {
  const auto& md = ctx.inputs[0].dims;
  const auto& yd = ctx.outputs[0].dims;
  const int64_t batch = md[1], tiles_h = md[2], tiles_w = md[3], outs = md[4];
  const int64_t height = yd[2], width = yd[3];
  const int64_t tile_stride = batch * tiles_h * tiles_w * outs;
  with_float(ctx, "winograd_output", [&]<class T>() {
    const T* m = ctx.inputs[0].as<const T>();
    T* y = ctx.outputs[0].as<T>();
    parallel_for(batch * outs, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t n = plane / outs, o = plane % outs;
        for (int64_t th = 0; th < tiles_h; ++th)
          for (int64_t tw = 0; tw < tiles_w; ++tw) {
            const int64_t at = ((n * tiles_h + th) * tiles_w + tw) * outs + o;
            for (int r = 0; r < kOutTile; ++r)
              for (int s = 0; s < kOutTile; ++s) {
                const int64_t h = 2 * th + r, w = 2 * tw + s;
                if (h >= height || w >= width) continue;
                double sum = 0;
                for (int i = 0; i < kTile; ++i)
                  for (int j = 0; j < kTile; ++j)
                    sum += kAt[r][i] * kAt[s][j] * double(m[(i * kTile + j) * tile_stride + at]);
                y[((n * outs + o) * height + h) * width + w] = T(sum);
              }
          }
      }
    });
  });
}

}  // namespace

void register_winograd(KernelTable& t) {
  t.set(OpKind::WinogradWeights, weights_kernel);
  t.set(OpKind::WinogradInput, input_kernel);
  t.set(OpKind::WinogradOutput, output_kernel);
}

}  // namespace kiln::reference
