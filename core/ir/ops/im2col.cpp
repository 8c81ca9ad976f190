#include "core/ir/ops/im2col.h"

#include <numeric>

#include "core/ir/op.h"

namespace kiln::ops {
namespace {

// The coordinates of row-major index `i` over `dims`.
std::vector<int64_t> row_major_coords(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (size_t d = dims.size(); d-- > 0; i /= dims[d]) c[d] = i % dims[d];
  return c;
}

// The columns may take at most this many elements (256 MiB of f32), and their gather index (taps x
// output pixels, a constant) this many.
constexpr int64_t kMaxColumnElements = int64_t(1) << 26, kMaxGatherIndex = int64_t(1) << 22;

}  // namespace

std::optional<Columns> im2col(GradBuilder& b, Value* input, const Window& w, const std::vector<int64_t>& pad_end,
                              const std::vector<int64_t>& osp, ColumnOrder order) {
  const size_t s = w.spatial;
  if (!input->type.shape[0].is_static()) return std::nullopt;
  const int64_t n = input->type.shape[0].value();
  Columns out;
  out.taps = 1;
  out.pixels = 1;
  for (int64_t k : w.kernel) out.taps *= k;
  for (int64_t o : osp) out.pixels *= o;
  const int64_t ci = channels_of(b, input, "input"), channel_multiple = 4 / std::gcd(out.taps, int64_t(4));
  out.channels = (ci + channel_multiple - 1) / channel_multiple * channel_multiple;
  if (n * out.pixels * out.taps * out.channels > kMaxColumnElements || out.taps * out.pixels > kMaxGatherIndex)
    return std::nullopt;
  const std::vector<int64_t> in = spatial_of(b, input, "input");
  std::vector<int64_t> pads(2 * (s + 2), 0), plane_dims(s);
  pads[s + 3] = out.channels - ci;  // the end of dim 1, the channels
  bool padded = out.channels != ci;
  int64_t plane = 1;
  for (size_t i = 0; i < s; ++i) {
    pads[2 + i] = w.pad_begin[i];
    pads[s + 4 + i] = pad_end[i];
    padded = padded || w.pad_begin[i] != 0 || pad_end[i] != 0;
    plane_dims[i] = in[i] + w.pad_begin[i] + pad_end[i];
    plane *= plane_dims[i];
    if ((osp[i] - 1) * w.stride[i] + w.extent(i) > plane_dims[i]) return std::nullopt;
  }
  Value* x = padded ? b.pad(input, pads) : input;
  // Each output pixel's and tap's offset in a padded channel plane of the input element it reads,
  // in the order the rows of columns go: (pixel, tap) for pixel-major columns, else (tap, pixel).
  std::vector<double> offsets(size_t(out.taps * out.pixels));
  for (int64_t o = 0; o < out.pixels; ++o) {
    const std::vector<int64_t> p = row_major_coords(o, osp);
    for (int64_t t = 0; t < out.taps; ++t) {
      const std::vector<int64_t> k = row_major_coords(t, w.kernel);
      int64_t offset = 0;
      for (size_t i = 0; i < s; ++i) offset = offset * plane_dims[i] + p[i] * w.stride[i] + k[i] * w.dilation[i];
      offsets[size_t(order == ColumnOrder::PixelMajor ? o * out.taps + t : t * out.pixels + o)] = double(offset);
    }
  }
  auto gather = [&](Value* from, int64_t dim) {
    const DType index_type = plane < (int64_t(1) << 31) ? DType::I32 : DType::I64;
    Value* index = b.constant(offsets, {out.taps * out.pixels}, index_type);
    return b.op(OpKind::IndexSelect, {from, index}, {{"dim", dim}});
  };
  if (order == ColumnOrder::ChannelMajor) {
    // [N, C, plane] gathered along the plane -> [N, C, taps * pixels] -> [N, C * taps, pixels]
    Value* gathered = gather(b.reshape(x, {n, out.channels, plane}), 2);
    out.columns = b.reshape(gathered, {n, out.channels * out.taps, out.pixels});
    return out;
  }
  // The input channels last, [N, plane, C], so that each gathered row of C channels is read in
  // order -> [N, pixels * taps, C] -> [N, pixels, taps * C].
  std::vector<int64_t> channels_last = {0};
  for (size_t i = 0; i < s; ++i) channels_last.push_back(int64_t(2 + i));
  channels_last.push_back(1);
  Value* gathered = gather(b.reshape(b.permute(x, channels_last), {n, plane, out.channels}), 1);
  out.columns = b.reshape(gathered, {n, out.pixels, out.taps * out.channels});
  return out;
}

Value* conv_as_matmul(GradBuilder& b, Value* input, Value* weight, Value* bias, const Window& w) {
  const std::vector<int64_t> osp = spatial_of(b, b.output(), "output");
  const std::optional<Columns> cols = im2col(b, input, w, w.pad_end, osp, ColumnOrder::ChannelMajor);
  if (!cols) return nullptr;
  // weight [Co, C, *kernel] -> [Co, C * taps], with the columns' zero channels
  const int64_t n = input->type.shape[0].value(), co = b.static_dim(weight, 0, "weight");
  const int64_t ci = b.static_dim(weight, 1, "weight");
  Value* matrix = weight;
  if (cols->channels != ci) {
    std::vector<int64_t> pads(2 * weight->type.rank(), 0);
    pads[weight->type.rank() + 1] = cols->channels - ci;  // the end of dim 1
    matrix = b.pad(weight, pads);
  }
  matrix = b.reshape(matrix, {co, cols->channels * cols->taps});
  Value* product = b.op(OpKind::MatMul, {matrix, cols->columns});  // [N, Co, pixels]
  Shape shape = {SymInt(n), SymInt(co)};
  for (int64_t o : osp) shape.push_back(SymInt(o));
  Value* out = b.reshape(product, shape);
  if (!bias) return out;
  Shape bias_shape = {SymInt(co)};
  for (size_t i = 0; i < osp.size(); ++i) bias_shape.push_back(SymInt(1));
  return b.op(OpKind::Add, {out, b.reshape(bias, bias_shape)});
}

}  // namespace kiln::ops
