// kiln::Device names one device: "cpu", "ref", "vulkan:0", "cuda:1", "null".
#pragma once

#include <string>
#include <string_view>

#include "backends/backend.h"

namespace kiln {

class Device {
 public:
  Device() = default;  // cpu
  Device(BackendKind kind, int index) : kind_(kind), index_(index) {}

  static Device cpu() { return {}; }
  // The reference interpreter: every op by its reference kernel, compiled graphs node by node. The
  // oracle other devices are checked against.
  static Device ref() { return {BackendKind::Ref, 0}; }
  // The best available device (the first of available_devices() not ranked kOnlyByName): a
  // Vulkan GPU, then CUDA, then cpu. A software Vulkan device (lavapipe) is used only when named.
  // KILN_DEVICE=vulkan:1 overrides the choice.
  static Device best();
  // "cpu", "ref", "null", "vulkan", "vulkan:1", "cuda:0"; throws kiln::Error for unknown names and for
  // devices that are not available here, saying why.
  static Device parse(std::string_view text);

  BackendKind kind() const { return kind_; }
  int index() const { return index_; }
  std::string name() const;         // "vulkan:0": what parse() accepts
  std::string description() const;  // the driver's device name, "llvmpipe (LLVM 15.0.6, 256 bits)"
  Backend& backend() const;         // opens the device on first use
  // Bytes in kiln's buffers on this device now and at most since reset_peak_memory() (MemoryStats).
  MemoryStats memory_stats() const { return backend().memory_stats(); }
  void reset_peak_memory() const { backend().reset_peak_memory(); }

  bool operator==(const Device&) const = default;

 private:
  BackendKind kind_ = BackendKind::Cpu;
  int index_ = 0;
};

}  // namespace kiln
