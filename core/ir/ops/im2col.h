// A conv's input as columns (im2col): for each output pixel and kernel tap, the input element that
// tap reads, gathered at once by one index_select with a constant index. Both ways a conv becomes a
// matmul use it: a conv's weight gradient (conv_expand.cpp) and a conv itself, for backends whose
// matmul outruns their conv at a shape (the conv-as-matmul pass).
#pragma once

#include <optional>
#include <vector>

#include "core/ir/grad_builder.h"
#include "core/ir/ops/conv_window.h"

namespace kiln::ops {

// How the columns' elements go: pixel-major [N, pixels, taps * C] (row (tap, channel) per pixel, the
// weight gradient's right operand) or channel-major [N, C * taps, pixels] (row (channel, tap), the
// right operand of a conv's own product, whose result is then channels-first).
enum class ColumnOrder { PixelMajor, ChannelMajor };

struct Columns {
  Value* columns = nullptr;  // in the order asked for
  int64_t channels = 0;      // the input's channels, padded with zero channels (see im2col)
  int64_t taps = 0, pixels = 0;
};

// The columns of `input` ([N, C, *spatial], every size a number) that window `w` reads, with
// `pad_end` past the input's end, for output spatial sizes `osp`, gathered by one index_select
// with a constant index. Zero channels pad each row of taps x channels to a multiple of 4 floats,
// which the matmul templates read as vec4 texels (a first conv's 7x7 taps of 3 channels, 147
// columns, ran 4x slower than 148 on lavapipe: BENCHMARKS Run 38). nullopt for a symbolic batch,
// columns or an index past their bounds, or windows that reach past the padded input.
std::optional<Columns> im2col(GradBuilder& b, Value* input, const Window& w, const std::vector<int64_t>& pad_end,
                              const std::vector<int64_t>& osp, ColumnOrder order);

// conv(input, weight, bias) of one group with window `w` as channel-major columns and one matmul
// per image: y[n] = weight [Co, C * taps] x columns[n] [C * taps, pixels], channels-first as the
// conv's output. nullptr, having built nothing, where im2col declines.
Value* conv_as_matmul(GradBuilder& b, Value* input, Value* weight, Value* bias, const Window& w);

}  // namespace kiln::ops
