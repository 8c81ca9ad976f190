// kiln::Device names one device: "cpu", "vulkan:0", "cuda:1", "null".
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
  // The best available device: a Vulkan GPU, then CUDA, then a software Vulkan device (lavapipe),
  // then cpu. KILN_DEVICE=vulkan:1 overrides the choice.
  static Device best();
  // "cpu", "null", "vulkan", "vulkan:1", "cuda:0"; throws kiln::Error for unknown names and for
  // devices that are not available here, saying why.
  static Device parse(std::string_view text);

  BackendKind kind() const { return kind_; }
  int index() const { return index_; }
  std::string name() const;         // "vulkan:0": what parse() accepts
  std::string description() const;  // the driver's device name, "llvmpipe (LLVM 15.0.6, 256 bits)"
  Backend& backend() const;         // opens the device on first use

  bool operator==(const Device&) const = default;

 private:
  BackendKind kind_ = BackendKind::Cpu;
  int index_ = 0;
};

}  // namespace kiln
