// DeviceTensor: the runtime's value. A type, the device that holds the data and the buffer itself;
// programs, the interpreter, checked mode and accuracy checks take and return these. The front
// end's Tensor (core/frontend/tensor.h) is one of these plus tracing and autograd.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/backend.h"
#include "backends/device.h"
#include "core/ir/shape.h"

namespace kiln {

struct DeviceTensor {
  TensorType type;
  Device device;
  std::shared_ptr<Buffer> buffer;  // shared with reshaped views; null for an absent operand
  // A program input whose caller gives its buffer up: the program may write an output over it
  // (ProgramOptions::outputs_over_inputs). Only where nothing else holds the buffer.
  bool donated = false;

  // Uninitialized memory for `type` (static dims) on `device`.
  static DeviceTensor allocate(const TensorType& type, Device device);
  // `bytes` (elements of type.dtype, row-major) copied into new memory on `device`.
  static DeviceTensor upload(const TensorType& type, const void* bytes, Device device);

  bool defined() const { return buffer != nullptr; }
  std::vector<int64_t> sizes() const { return static_dims(type.shape); }
  int64_t numel() const { return kiln::numel(type.shape).hint(); }
  size_t bytes() const { return size_t(numel()) * dtype_size(type.dtype); }

  // The same data on `to` (this tensor itself when it is already there).
  DeviceTensor copy_to(Device to) const;
  // Downloads every element, converted to `dtype`, into `dst`.
  void read_elements(void* dst, DType dtype) const;
  template <class T>
  std::vector<T> to_host() const {
    static_assert(!std::is_same_v<T, bool>, "read bools as uint8_t");
    std::vector<T> out(static_cast<size_t>(numel()));
    if (!out.empty()) read_elements(out.data(), dtype_of<T>::value);
    return out;
  }
};

std::vector<TensorType> types_of(const std::vector<DeviceTensor>& tensors);

}  // namespace kiln
