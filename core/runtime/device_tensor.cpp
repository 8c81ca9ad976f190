// DeviceTensor's allocation and host transfers.
#include "core/runtime/device_tensor.h"

namespace kiln {

DeviceTensor DeviceTensor::allocate(const TensorType& type, Device device) {
  DeviceTensor t{type, device, nullptr};
  t.buffer = device.backend().alloc(t.bytes());
  return t;
}

DeviceTensor DeviceTensor::upload(const TensorType& type, const void* bytes, Device device) {
  DeviceTensor t = allocate(type, device);
  if (t.bytes()) device.backend().upload(*t.buffer, bytes, t.bytes());
  return t;
}

DeviceTensor DeviceTensor::copy_to(Device to) const {
  if (to == device) return *this;
  std::vector<uint8_t> host(bytes());
  if (!host.empty()) device.backend().download(*buffer, host.data(), host.size());
  return upload(type, host.data(), to);
}

void DeviceTensor::read_elements(void* dst, DType dtype) const {
  if (!bytes()) return;
  if (dtype == type.dtype) {  // straight into dst: no staging copy
    device.backend().download(*buffer, dst, bytes());
    return;
  }
  std::vector<uint8_t> host(bytes());
  device.backend().download(*buffer, host.data(), host.size());
  convert_elements(host.data(), type.dtype, dst, dtype, size_t(numel()));
}

std::vector<TensorType> types_of(const std::vector<DeviceTensor>& tensors) {
  std::vector<TensorType> out;
  out.reserve(tensors.size());
  for (const DeviceTensor& t : tensors) out.push_back(t.type);
  return out;
}

}  // namespace kiln
