// kiln::debug::show opens kiln-debug's views on a compiled function in process; here on ImGui's
// null renderer (no display), after checking the bundle it shows is the compiled program's.
#include <gtest/gtest.h>

#include <string>

#include <kiln/kiln.h>

#include "debugger/show.h"

namespace kiln {
namespace {

Tensor block(const Tensor& x, const Tensor& w) { return relu(matmul(x, w) + 1.0) * 2.0; }

void check_show(Device device) {
  auto fast = compile(block, {.name = "block"});
  try {
    fast.bundle();
    FAIL() << "a bundle before the first call";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has not been compiled yet"), std::string::npos) << e.what();
  }
  Tensor x = randn({4, 8}, device, 1), w = randn({8, 16}, device, 2);
  fast(x, w);
  trace::Bundle b = fast.bundle();
  EXPECT_EQ(b.name, "block");
  EXPECT_EQ(b.device, device.name());
  // ref interprets: one kernel per computing node; cpu and vulkan: the program's fused kernels.
  int64_t computing = 0;
  for (const trace::BundleNode& n : b.nodes) computing += n.op != "constant";
  EXPECT_EQ(int64_t(b.kernels.size()),
            device == Device::ref() ? computing : fast.stats().program.kernels);
  EXPECT_FALSE(b.passes.empty());
  EXPECT_EQ(debug::show(fast, {.headless = true, .frames = 3}), 0);
}

TEST(DebugShow, ShowsTheInterpretedFunctionOnRef) { check_show(Device::ref()); }

TEST(DebugShow, ShowsTheCompiledProgramOnCpu) { check_show(Device::cpu()); }

TEST(DebugShow, ShowsTheCompiledProgramOnVulkan) {
  Device vulkan;
  try {
    vulkan = Device::parse("vulkan");
  } catch (const Error& e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  check_show(vulkan);
}

}  // namespace
}  // namespace kiln
