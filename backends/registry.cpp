// The list of backends compiled into this build, and device lookup across them.
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "core/support/error.h"

namespace kiln {

BackendFactory ref_backend_factory();
BackendFactory cpu_backend_factory();
BackendFactory null_backend_factory();
BackendFactory cuda_backend_factory();
#ifdef KILN_HAVE_VULKAN
BackendFactory vulkan_backend_factory();
#endif

namespace {

// The registered backends, one line each (a declaration above and an entry here).
const std::vector<BackendFactory>& factories() {
  static const std::vector<BackendFactory> all = {
#ifdef KILN_HAVE_VULKAN
      vulkan_backend_factory(),
#endif
      cuda_backend_factory(),
      cpu_backend_factory(),
      ref_backend_factory(),
      null_backend_factory(),
  };
  return all;
}

}  // namespace

std::vector<DeviceEntry> available_devices() {
  std::vector<DeviceEntry> all;
  for (const BackendFactory& f : factories()) {
    std::string why;
    for (DeviceEntry& d : f.enumerate(&why)) {
      d.rank = f.rank(d);
      all.push_back(std::move(d));
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const DeviceEntry& a, const DeviceEntry& b) {
    return a.rank < b.rank;
  });
  return all;
}

std::vector<BackendKind> registered_backends() {
  std::vector<BackendKind> kinds;
  for (const BackendFactory& f : factories()) kinds.push_back(f.kind);
  return kinds;
}

bool backend_is_indexed(BackendKind kind) {
  for (const BackendFactory& f : factories())
    if (f.kind == kind) return f.indexed;
  return true;
}

namespace {
// Created on first use, so open backends are destroyed before anything created earlier.
struct OpenBackends {
  std::mutex mutex;
  std::map<std::pair<BackendKind, int>, std::unique_ptr<Backend>> map;
  std::vector<std::pair<BackendKind, int>> opened;  // in the order they opened
};
OpenBackends& open_backends() {
  static OpenBackends open;
  return open;
}

// At exit each backend closes right after what was created once it had opened, and before the
// libraries it loaded while opening (the Vulkan driver and validation layer) run their static
// destructors: those are registered after the registry itself, so a backend the registry destroyed
// would call into a layer whose state is gone (its frees were dropped: lavapipe kept every block).
// exit() runs handlers last-registered first, so each handler closes the latest backend still open.
void close_latest_backend() {
  OpenBackends& o = open_backends();
  std::unique_ptr<Backend> closing;
  {
    std::lock_guard lock(o.mutex);
    if (o.opened.empty()) return;
    auto it = o.map.find(o.opened.back());
    o.opened.pop_back();
    if (it == o.map.end()) return;
    closing = std::move(it->second);
    o.map.erase(it);
  }
}

Backend& add_open_backend(OpenBackends& o, std::pair<BackendKind, int> key,
                          std::unique_ptr<Backend> backend) {
  Backend& ref = *o.map.emplace(key, std::move(backend)).first->second;
  o.opened.push_back(key);
  std::atexit(close_latest_backend);
  return ref;
}
}  // namespace

Backend& install_backend(BackendKind kind, int index, std::unique_ptr<Backend> backend) {
  OpenBackends& o = open_backends();
  std::lock_guard lock(o.mutex);
  if (o.map.count({kind, index}))
    throw Error(std::string("device ") + backend_kind_name(kind) + ":" + std::to_string(index) +
                " is already open: install a backend for it before first use");
  return add_open_backend(o, {kind, index}, std::move(backend));
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
    return add_open_backend(open_backends(), key, f.open(index));
  }
  throw Error(std::string("backend '") + backend_kind_name(kind) +
              "' is not built into this kiln (its SDK was missing at build time)");
}

}  // namespace kiln
