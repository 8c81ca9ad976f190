// `kiln devices`: every device this build can reach, best first, with what kiln reads of it; for each
// registered backend with none, why (no driver, no device).
#include <cstdio>

#include "backends/backend.h"
#include "core/support/error.h"
#include "tools/kiln/cli_util.h"

namespace kiln::cli {

int cmd_devices(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::printf("usage: kiln devices\n\nLists the devices kiln can run on, best first (the one "
                "Device::best() picks is the first), and why a backend has none.\n");
    return args[0] == "--help" || args[0] == "-h" ? 0 : 2;
  }
  const std::vector<DeviceEntry> devices = available_devices();
  for (const DeviceEntry& d : devices) {
    const DeviceCaps& c = d.caps;
    const bool gpu_backend = backend_is_indexed(d.kind);  // the host backends have one device
    std::printf("%s:%d  %s%s\n", backend_kind_name(d.kind), d.index, d.name.c_str(),
                c.is_cpu && gpu_backend ? "  (software)" : "");
    if (!gpu_backend) continue;
    std::printf("    f16 %s, f64 %s, int64 %s, subgroup %u, shared memory %zu KiB, memory %.1f GiB\n",
                c.f16 ? "yes" : "no", c.f64 ? "yes" : "no", c.int64 ? "yes" : "no", c.subgroup_size,
                c.shared_memory_bytes / 1024, double(c.memory_bytes) / (1 << 30));
  }
  for (BackendKind kind : registered_backends()) {
    bool found = false;
    for (const DeviceEntry& d : devices) found = found || d.kind == kind;
    if (found) continue;
    try {
      backend_for(kind, 0);
    } catch (const Error& e) {
      std::printf("%s: none (%s)\n", backend_kind_name(kind), e.what());
    }
  }
  return 0;
}

}  // namespace kiln::cli
