// Helpers for the runtime tests: parsed graphs, the Vulkan device when there is one, comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include <kiln/kiln.h>

#include "core/ir/text.h"
#include "core/ir/verifier.h"

namespace kiln::testing {

inline Graph parse_checked(const std::string& text) {
  Graph g = parse_graph(text);
  verify_graph_or_throw(g);
  return g;
}

inline std::optional<Device> vulkan_device() {
  for (const DeviceEntry& e : available_devices())
    if (e.kind == BackendKind::Vulkan) return Device(e.kind, e.index);
  return std::nullopt;
}

inline std::optional<Device> cuda_device() {
  for (const DeviceEntry& e : available_devices())
    if (e.kind == BackendKind::Cuda) return Device(e.kind, e.index);
  return std::nullopt;
}

#define KILN_REQUIRE_VULKAN(dev)                                                         \
  auto dev##_opt = ::kiln::testing::vulkan_device();                                     \
  if (!dev##_opt) GTEST_SKIP() << "no Vulkan device on this machine (lavapipe missing?)"; \
  ::kiln::Device dev = *dev##_opt

// Elementwise |a-b| <= atol + rtol*|b|.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol = 1e-5f,
                         float atol = 1e-6f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i]))
        << "element " << i << ": got " << got[i] << ", want " << want[i];
}

}  // namespace kiln::testing
