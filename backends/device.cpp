// Device naming, parsing and the best-device choice.
#include "backends/device.h"

#include <cstdlib>

#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {

std::string Device::name() const {
  if (kind_ == BackendKind::Cpu || kind_ == BackendKind::Ref || kind_ == BackendKind::Null)
    return backend_kind_name(kind_);
  return std::string(backend_kind_name(kind_)) + ":" + std::to_string(index_);
}

std::string Device::description() const { return backend().name(); }

Backend& Device::backend() const { return backend_for(kind_, index_); }

Device Device::parse(std::string_view text) {
  std::string_view kind_text = text.substr(0, text.find(':'));
  int index = 0;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    std::string idx(text.substr(colon + 1));
    char* end = nullptr;
    long v = std::strtol(idx.c_str(), &end, 10);
    if (idx.empty() || *end != '\0' || v < 0)
      throw Error("bad device '" + std::string(text) + "': the index after ':' must be a number");
    index = int(v);
  }
  BackendKind kind;
  if (kind_text == "cpu") kind = BackendKind::Cpu;
  else if (kind_text == "ref") kind = BackendKind::Ref;
  else if (kind_text == "null") kind = BackendKind::Null;
  else if (kind_text == "vulkan") kind = BackendKind::Vulkan;
  else if (kind_text == "cuda") kind = BackendKind::Cuda;
  else
    throw Error("unknown device '" + std::string(text) + "'; expected cpu, ref, vulkan[:N], cuda[:N] or null");
  Device d(kind, index);
  d.backend();  // fails here, with the reason, when the device is not available
  return d;
}

Device Device::best() {
  if (const char* env = std::getenv("KILN_DEVICE"); env && *env) return parse(env);
  for (const DeviceEntry& e : available_devices()) {
    if (e.kind == BackendKind::Vulkan && !e.caps.is_cpu) return Device(e.kind, e.index);
    if (e.kind == BackendKind::Cuda) return Device(e.kind, e.index);
  }
  log::info("no GPU device found (Vulkan or CUDA); running on the cpu backend");
  return cpu();
}

}  // namespace kiln
