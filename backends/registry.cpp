// The list of backends compiled into this build, and device lookup across them.
#include <map>
#include <mutex>

#include "backends/backend.h"
#include "core/support/error.h"

namespace kiln {

BackendFactory cpu_backend_factory();
BackendFactory null_backend_factory();
BackendFactory cuda_backend_factory();
#ifdef KILN_HAVE_VULKAN
BackendFactory vulkan_backend_factory();
#endif

namespace {

std::vector<BackendFactory> factories() {
  return {
#ifdef KILN_HAVE_VULKAN
      vulkan_backend_factory(),
#endif
      cuda_backend_factory(), cpu_backend_factory(), null_backend_factory()};
}

// Best first; the null backend is never chosen automatically.
int preference(const DeviceEntry& d) {
  if (d.kind == BackendKind::Null) return 100;
  if (d.kind == BackendKind::Cpu) return 50;
  if (d.kind == BackendKind::Vulkan && !d.caps.is_cpu) return 0;
  if (d.kind == BackendKind::Cuda) return 1;
  return 10;  // software GPUs (lavapipe)
}

}  // namespace

std::vector<DeviceEntry> available_devices() {
  std::vector<DeviceEntry> all;
  for (const BackendFactory& f : factories()) {
    std::string why;
    for (DeviceEntry& d : f.enumerate(&why)) all.push_back(std::move(d));
  }
  std::stable_sort(all.begin(), all.end(), [](const DeviceEntry& a, const DeviceEntry& b) {
    return preference(a) < preference(b);
  });
  return all;
}

namespace {
// Created on first use, so open backends are destroyed before anything created earlier.
struct OpenBackends {
  std::mutex mutex;
  std::map<std::pair<BackendKind, int>, std::unique_ptr<Backend>> map;
};
OpenBackends& open_backends() {
  static OpenBackends open;
  return open;
}
}  // namespace

Backend& install_backend(BackendKind kind, int index, std::unique_ptr<Backend> backend) {
  OpenBackends& o = open_backends();
  std::lock_guard lock(o.mutex);
  if (o.map.count({kind, index}))
    throw Error(std::string("device ") + backend_kind_name(kind) + ":" + std::to_string(index) +
                " is already open: install a backend for it before first use");
  return *o.map.emplace(std::make_pair(kind, index), std::move(backend)).first->second;
}

Backend& backend_for(BackendKind kind, int index) {
  std::mutex& mutex = open_backends().mutex;
  auto& open = open_backends().map;
  std::lock_guard lock(mutex);
  auto key = std::make_pair(kind, index);
  auto it = open.find(key);
  if (it != open.end()) return *it->second;
  for (const BackendFactory& f : factories()) {
    if (f.kind != kind) continue;
    std::string why;
    auto devices = f.enumerate(&why);
    if (index < 0 || index >= int(devices.size()))
      throw Error(std::string("device ") + backend_kind_name(kind) + ":" + std::to_string(index) +
                  " is not available" + (why.empty() ? "" : ": " + why) + " (" +
                  std::to_string(devices.size()) + " such device(s) found)");
    auto backend = f.open(index);
    Backend& ref = *backend;
    open.emplace(key, std::move(backend));
    return ref;
  }
  throw Error(std::string("backend '") + backend_kind_name(kind) +
              "' is not built into this kiln (not implemented yet, or its SDK was missing at build "
              "time)");
}

}  // namespace kiln
