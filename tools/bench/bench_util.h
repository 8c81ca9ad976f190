// What the benchmark programs share: medians, waiting for a device's queued work, and comma lists.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/kiln.h"
#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace kiln::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Waits for every queued op on the device (eager launches of GPU backends are asynchronous).
inline void wait_for(const Device& device) { device.backend().sync_eager(); }

// "cpu,vulkan" -> {"cpu", "vulkan"}.
inline std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace kiln::bench
