// The cpu backend's matmul, convolution (and its input and weight gradients: conv_transpose and
// conv_weight_grad) and pooling: oneDNN primitives (Debian's libdnnl, what PyTorch uses on CPUs),
// created once per host op at its planned shapes. Ops oneDNN does not take here (other dtypes,
// gemm with alpha/beta, 1-d matmul operands and convolutions, average pooling that counts padding
// in ceil_mode) keep the reference kernel.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"

namespace kiln::cpu {

// One operand of a host op's launch: its memory, and the serial of its buffer where the input is
// stable (BufferView::stable), else 0. What an op derives from a stable input (a convolution's
// weights reordered into its blocked layout) is kept by that serial.
struct HostOperand {
  void* data = nullptr;
  uint64_t serial = 0;
};

// A host op's kernel: a oneDNN primitive, or kiln's own loops for small matmuls (small_matmul.h).
class HostKernel {
 public:
  virtual ~HostKernel() = default;
  // The op's inputs and outputs in its slot order (inputs, then outputs), in host memory.
  virtual void run(const std::vector<HostOperand>& operands) = 0;
};

// The kernel for `run` (buffers may be null: only kinds, dtypes, dims and attrs are read), or
// nullptr when oneDNN is not built in or does not take this op. With an epilogue (`run` as
// Backend::plan_fused_template gives it), matmul and conv apply it as oneDNN post-ops: unary
// activations as eltwise ops, binary ops whose other operand is a scalar or runs along the
// result's channels (conv's dim 1, matmul's last dim) as binary ops. nullptr when a step is none of
// those, or when the post-ops would move oneDNN to another, slower kernel. A matmul of a few rows
// takes kiln's own loops where make_small_matmul does.
std::unique_ptr<HostKernel> make_onednn_op(const OpRun& run, std::span<const EpilogueStep> epilogue = {});

// Whether this kiln was built with oneDNN.
bool have_onednn();

// How many times, in this process, a convolution reordered weights into its own layout (tests).
uint64_t weight_reorders();

}  // namespace kiln::cpu
