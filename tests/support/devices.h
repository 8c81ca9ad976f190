// The devices a test runs on: every registered device that computes (ref, cpu and lavapipe here, a
// GPU where one is present), not the null backend.
#pragma once

#include <vector>

#include <kiln/kiln.h>

#include "backends/backend.h"

namespace kiln::testing {

inline std::vector<Device> computing_devices() {
  std::vector<Device> out;
  for (const DeviceEntry& e : available_devices())
    if (e.kind != BackendKind::Null) out.push_back(Device(e.kind, e.index));
  return out;
}

}  // namespace kiln::testing
