// Device naming, parsing and the best-device choice.
#include "backends/device.h"

#include <cstdlib>
#include <optional>

#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {

std::string Device::name() const {
  if (!backend_is_indexed(kind_)) return std::string(kind_.name());
  return std::string(kind_.name()) + ":" + std::to_string(index_);
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
  const std::vector<BackendKind> kinds = registered_backends();
  std::optional<BackendKind> kind;
  std::string expected;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i].name() == kind_text) kind = kinds[i];
    expected += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + std::string(kinds[i].name()) +
                (backend_is_indexed(kinds[i]) ? "[:N]" : "");
  }
  if (!kind) throw Error("unknown device '" + std::string(text) + "'; expected " + expected);
  Device d(*kind, index);
  d.backend();  // fails here, with the reason, when the device is not available
  return d;
}

Device Device::best() {
  if (const char* env = std::getenv("KILN_DEVICE"); env && *env) return parse(env);
  for (const DeviceEntry& e : available_devices()) {
    if (e.rank >= kOnlyByName) break;
    if (e.caps.is_cpu) log::info("no GPU device found; running on " + Device(e.kind, e.index).name());
    return Device(e.kind, e.index);
  }
  return cpu();
}

}  // namespace kiln
