// The cpu backend's matmul and convolution: oneDNN primitives (Debian's libdnnl, what PyTorch uses
// on CPUs), created once per host op at its planned shapes. Ops oneDNN does not take here (other
// dtypes, gemm with alpha/beta, 1-d matmul operands, conv_transpose) keep the reference kernel.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"

namespace kiln::cpu {

class OneDnnOp {
 public:
  virtual ~OneDnnOp() = default;
  // The op's inputs and outputs in its slot order (inputs, then outputs), in host memory.
  virtual void run(const std::vector<void*>& pointers) = 0;
};

// The primitive for `run` (buffers may be null: only kinds, dtypes, dims and attrs are read), or
// nullptr when oneDNN is not built in or does not take this op.
std::unique_ptr<OneDnnOp> make_onednn_op(const OpRun& run);

// Whether this kiln was built with oneDNN.
bool have_onednn();

}  // namespace kiln::cpu
