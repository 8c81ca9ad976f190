// Device faults as a user meets them, each on a Vulkan device of its own (the first device opened
// again), so the others stay healthy:
// - out of memory, under a 64 MiB limit (what KILN_VULKAN_MEMORY_LIMIT=64MiB gives the default
//   device): the error names the op and its line, or the compiled program and what it needed;
//   nothing of the failed call stays allocated; once the user frees tensors the same calls work.
// - a lost device (simulated: the next wait reports VK_ERROR_DEVICE_LOST): the error names the
//   compiled kernel that ran last and its ops' lines; the device stays lost, later calls fail at
//   once, and other devices go on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "backends/vulkan/vulkan_backend.h"
#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// vulkan:9, the first Vulkan device again, opened once with the limit.
Device limited_device() {
  static const Device device = [] {
    install_backend(BackendKind::Vulkan, 9, vulkan::open_backend(0, {.memory_limit_bytes = 64 * kMiB}));
    return Device(BackendKind::Vulkan, 9);
  }();
  return device;
}

vulkan::MemoryStats stats(Device device) {
  return dynamic_cast<vulkan::VulkanBackend&>(device.backend()).memory_stats();
}

// Holds 4 MiB results of `make` until one fails; returns its message (empty if none did).
template <class Make>
std::string fill_until_out_of_memory(std::vector<Tensor>& held, Make make) {
  for (int i = 0; i < 32; ++i) {
    const vulkan::MemoryStats before = stats(limited_device());
    try {
      held.push_back(make(float(i)));
    } catch (const OutOfMemoryError& e) {  // a kiln::Error a caller can tell apart
      const vulkan::MemoryStats after = stats(limited_device());
      EXPECT_EQ(after.buffers, before.buffers) << "the failed call kept a buffer";
      return e.what();
    }
  }
  return {};
}

TEST(OutOfMemory, AnEagerOpNamesItselfAndItsLineAndTheNextOpWorks) {
  KILN_REQUIRE_VULKAN(vk);
  const Device dev = limited_device();
  const Tensor a = full({1024, 1024}, 1.0, DType::F32, dev);  // 4 MiB
  const Tensor b = full({1024, 1024}, 2.0, DType::F32, dev);
  std::vector<Tensor> held;
  const int line = __LINE__ + 1;
  std::string message = fill_until_out_of_memory(held, [&](float) { return a + b; });
  ASSERT_FALSE(message.empty()) << "64 MiB never ran out";
  EXPECT_NE(message.find("op 'add' (f32[1024,1024], f32[1024,1024])"), std::string::npos) << message;
  EXPECT_NE(message.find("vulkan_device_faults_test.cpp:" + std::to_string(line)), std::string::npos)
      << message;
  EXPECT_NE(message.find("of the 64.0 MiB limit (KILN_VULKAN_MEMORY_LIMIT)"), std::string::npos) << message;
  held.clear();
  EXPECT_EQ((a + b).to_vector<float>()[12345], 3.0f);
}

TEST(OutOfMemory, ACompiledFunctionNamesItsOutputAndRunsOnceMemoryIsFreed) {
  KILN_REQUIRE_VULKAN(vk);
  const Device dev = limited_device();
  auto f = compile([](const Tensor& x) { return relu(x * 2.0 - 1.0); });
  const Tensor a = full({1024, 1024}, 1.0, DType::F32, dev);
  EXPECT_EQ(f(a).to_vector<float>()[7], 1.0f);  // compiled while memory is free
  std::vector<Tensor> held;
  std::string message = fill_until_out_of_memory(held, [&](float) { return f(a); });
  ASSERT_FALSE(message.empty()) << "64 MiB never ran out";
  EXPECT_NE(message.find("compiled program on vulkan:9: output 0 f32[1024,1024]: vulkan: out of device memory"),
            std::string::npos)
      << message;
  held.clear();
  EXPECT_EQ(f(a).to_vector<float>()[7], 1.0f);
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(DeviceLost, TheCompiledKernelRunningIsNamedWithItsLinesAndOtherDevicesGoOn) {
  KILN_REQUIRE_VULKAN(vk);
  install_backend(BackendKind::Vulkan, 8, vulkan::open_backend(0));
  const Device dev(BackendKind::Vulkan, 8);
  const int line = __LINE__ + 1;
  auto f = compile([](const Tensor& x) { return log(x * 2.0 + 1.0); });
  const Tensor x = full({64}, 1.0, DType::F32, dev);
  EXPECT_NEAR(f(x).to_vector<float>()[0], std::log(3.0f), 1e-6f);

  dynamic_cast<vulkan::VulkanBackend&>(dev.backend()).simulate_device_loss();
  std::string message;
  try {
    f(x);
  } catch (const DeviceLostError& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "the lost device went unnoticed";
  std::printf("%s\n", message.c_str());
  EXPECT_NE(message.find("compiled program on vulkan:8: the device was lost while kernel 0 'fused_"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("log at vulkan_device_faults_test.cpp:" + std::to_string(line)), std::string::npos)
      << message;
  EXPECT_NE(message.find("VK_ERROR_DEVICE_LOST"), std::string::npos) << message;

  // It stays lost: the next call fails at once (no hang), as an eager op on it does.
  EXPECT_THROW(f(x), DeviceLostError);
  const int read_line = __LINE__ + 2;
  try {
    (x + x).to_vector<float>();
    ADD_FAILURE() << "an eager op on the lost device went unnoticed";
  } catch (const DeviceLostError& e) {  // eager launches are queued: the read names its line and the kernel
    const std::string what = e.what();
    EXPECT_NE(what.find("reading a f32[64] tensor on vulkan:8 at vulkan_device_faults_test.cpp:" +
                        std::to_string(read_line)),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("the last 'add_f32"), std::string::npos) << what;
  }
  // Other devices go on, the same compiled function included.
  EXPECT_NEAR(f(x.to(Device::cpu())).to_vector<float>()[0], std::log(3.0f), 1e-6f);
  EXPECT_NEAR(f(full({64}, 1.0, DType::F32, vk)).to_vector<float>()[0], std::log(3.0f), 1e-6f);
}

}  // namespace
}  // namespace kiln
