// A borrowed contiguous row-major tensor in host memory (the caller owns `data`): what the cpu
// reference kernels and the kernel-IR evaluator read and write.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/shape.h"

namespace kiln {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  void* data = nullptr;

  int64_t numel() const { return kiln::numel(dims); }
  template <class T> T* as() const { return static_cast<T*>(data); }
};

}  // namespace kiln
