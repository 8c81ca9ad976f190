// Every op as a free function, named and ordered as in PyTorch. Each captures its caller's
// file:line (the trailing Loc default argument) into the op's provenance and error messages.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "core/frontend/tensor.h"

namespace kiln {

// An int or a pair, for stride/padding/dilation/kernel sizes: 3 or {3, 1}.
struct Int2 {
  Int2(int64_t v) : h(v), w(v) {}  // NOLINT
  Int2(int64_t h, int64_t w) : h(h), w(w) {}
  int64_t h, w;
};

// ---- unary pointwise
Tensor neg(const Tensor& x, Loc loc = Loc::current());
Tensor abs(const Tensor& x, Loc loc = Loc::current());
Tensor exp(const Tensor& x, Loc loc = Loc::current());
Tensor log(const Tensor& x, Loc loc = Loc::current());
Tensor sqrt(const Tensor& x, Loc loc = Loc::current());
Tensor rsqrt(const Tensor& x, Loc loc = Loc::current());
Tensor sin(const Tensor& x, Loc loc = Loc::current());
Tensor cos(const Tensor& x, Loc loc = Loc::current());
Tensor tanh(const Tensor& x, Loc loc = Loc::current());
Tensor sigmoid(const Tensor& x, Loc loc = Loc::current());
Tensor relu(const Tensor& x, Loc loc = Loc::current());
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01, Loc loc = Loc::current());
Tensor elu(const Tensor& x, double alpha = 1.0, Loc loc = Loc::current());
// approximate: "none" (the erf form) or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none", Loc loc = Loc::current());
Tensor silu(const Tensor& x, Loc loc = Loc::current());
Tensor erf(const Tensor& x, Loc loc = Loc::current());
Tensor floor(const Tensor& x, Loc loc = Loc::current());
Tensor ceil(const Tensor& x, Loc loc = Loc::current());
Tensor round(const Tensor& x, Loc loc = Loc::current());  // half to even
Tensor sign(const Tensor& x, Loc loc = Loc::current());
Tensor reciprocal(const Tensor& x, Loc loc = Loc::current());
Tensor logical_not(const Tensor& x, Loc loc = Loc::current());
Tensor cast(const Tensor& x, DType dtype, Loc loc = Loc::current());
Tensor clip(const Tensor& x, std::optional<double> min, std::optional<double> max,
            Loc loc = Loc::current());
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max,
             Loc loc = Loc::current());

// ---- binary pointwise, numpy broadcasting; a double operand becomes a scalar of x's dtype
#define KILN_DECLARE_BINARY(name)                                              \
  Tensor name(const Tensor& a, const Tensor& b, Loc loc = Loc::current());     \
  Tensor name(const Tensor& a, double b, Loc loc = Loc::current());
KILN_DECLARE_BINARY(add)
KILN_DECLARE_BINARY(sub)
KILN_DECLARE_BINARY(mul)
KILN_DECLARE_BINARY(div)  // integer operands: truncating division
KILN_DECLARE_BINARY(pow)
KILN_DECLARE_BINARY(maximum)
KILN_DECLARE_BINARY(minimum)
KILN_DECLARE_BINARY(remainder)  // sign of the divisor, like Python's %
KILN_DECLARE_BINARY(fmod)       // sign of the dividend, like C's fmod
KILN_DECLARE_BINARY(eq)
KILN_DECLARE_BINARY(ne)
KILN_DECLARE_BINARY(lt)
KILN_DECLARE_BINARY(le)
KILN_DECLARE_BINARY(gt)
KILN_DECLARE_BINARY(ge)
#undef KILN_DECLARE_BINARY
Tensor logical_and(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor logical_or(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor logical_xor(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b, Loc loc = Loc::current());

// ---- reductions; empty dims means all dims
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
           Loc loc = Loc::current());
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
            Loc loc = Loc::current());
Tensor prod(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
            Loc loc = Loc::current());
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
            Loc loc = Loc::current());
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
            Loc loc = Loc::current());
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
           Loc loc = Loc::current());  // same as amax
Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
           Loc loc = Loc::current());  // same as amin
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false,
                 Loc loc = Loc::current());
// Index (i64) of the first maximum / minimum along dim.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false, Loc loc = Loc::current());
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false, Loc loc = Loc::current());
Tensor softmax(const Tensor& x, int64_t dim, Loc loc = Loc::current());
Tensor log_softmax(const Tensor& x, int64_t dim, Loc loc = Loc::current());

// ---- linear algebra
// numpy matmul: 1-d operands are promoted and squeezed back, batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
// ONNX Gemm on 2-d operands: alpha * op(a) @ op(b) + beta * c, c broadcast to the result.
Tensor gemm(const Tensor& a, const Tensor& b, const Tensor& c = {}, double alpha = 1.0,
            double beta = 1.0, bool trans_a = false, bool trans_b = false, Loc loc = Loc::current());
// x @ weight^T + bias with weight [out, in], like torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              Loc loc = Loc::current());

// ---- convolution and pooling (NCW / NCHW)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1,
              Loc loc = Loc::current());
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, Int2 stride = 1,
              Int2 padding = 0, Int2 dilation = 1, int64_t groups = 1, Loc loc = Loc::current());
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        Int2 stride = 1, Int2 padding = 0, Int2 output_padding = 0,
                        int64_t groups = 1, Int2 dilation = 1, Loc loc = Loc::current());
// stride defaults to the kernel size.
Tensor max_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride = std::nullopt,
                  Int2 padding = 0, Int2 dilation = 1, bool ceil_mode = false,
                  Loc loc = Loc::current());
Tensor avg_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride = std::nullopt,
                  Int2 padding = 0, bool ceil_mode = false, bool count_include_pad = true,
                  Loc loc = Loc::current());
// Mean over all spatial dims, kept as size 1: [N, C, H, W] -> [N, C, 1, 1].
Tensor global_avg_pool(const Tensor& x, Loc loc = Loc::current());

// ---- normalization
Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                  const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5,
                  Loc loc = Loc::current());
// Inference batch norm over dim 1 with running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5,
                  Loc loc = Loc::current());
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, Loc loc = Loc::current());

// ---- shape and data movement
inline constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
Tensor reshape(const Tensor& x, const Dims& shape, Loc loc = Loc::current());  // one -1 allowed
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims, Loc loc = Loc::current());
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, Loc loc = Loc::current());
// x[start:end:step] along dim; negative start/end count from the end; step may be negative.
Tensor slice(const Tensor& x, int64_t dim, int64_t start = 0, int64_t end = kEnd,
             int64_t step = 1, Loc loc = Loc::current());
Tensor concat(const std::vector<Tensor>& tensors, int64_t dim = 0, Loc loc = Loc::current());
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0, Loc loc = Loc::current());
// Pieces of split_size along dim (the last may be smaller), or of the given sizes.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0,
                          Loc loc = Loc::current());
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0,
                          Loc loc = Loc::current());
// out[i][j] = x[index[i][j]][j] for dim 0 (torch.gather); index is i32 or i64.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, Loc loc = Loc::current());
// Picks whole slices along dim; out shape = x.shape[:dim] + index.shape + x.shape[dim+1:]
// (ONNX Gather; torch.index_select for a 1-d index). Negative indices count from the end.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, Loc loc = Loc::current());
Tensor expand(const Tensor& x, const Dims& shape, Loc loc = Loc::current());  // -1 keeps a dim
// pads as in torch.nn.functional.pad: (last_begin, last_end, prev_begin, prev_end, ...).
// mode: "constant", "reflect" or "replicate" ("edge" is accepted too).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, std::string_view mode = "constant",
           double value = 0.0, Loc loc = Loc::current());
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1,
               Loc loc = Loc::current());
Tensor squeeze(const Tensor& x, Loc loc = Loc::current());  // all size-1 dims
Tensor squeeze(const Tensor& x, int64_t dim, Loc loc = Loc::current());
Tensor unsqueeze(const Tensor& x, int64_t dim, Loc loc = Loc::current());
Tensor tile(const Tensor& x, const std::vector<int64_t>& repeats, Loc loc = Loc::current());
// Rows of weight picked by indices: out shape = indices.shape + [embedding_dim].
Tensor embedding(const Tensor& indices, const Tensor& weight, Loc loc = Loc::current());

}  // namespace kiln
