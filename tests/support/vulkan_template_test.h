// What the Vulkan template tests share: the Khronos validation layer requested before any backend
// opens, a fixture base that opens the Vulkan device and the cpu reference (skipping without a
// Vulkan device) and fails a test on any validation message, seeded inputs, running one op on host
// data, and the tolerance for sums of products.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/runtime/eager_programs.h"
#include "backends/vulkan/vulkan_backend.h"

namespace kiln::testing {

inline const bool kVulkanValidationRequested = [] { return setenv("KILN_VULKAN_VALIDATION", "1", 0) == 0; }();

// Base for fixtures of template tests (Base: ::testing::Test or a TestWithParam). Subclasses call
// SetUp() first and return when IsSkipped(); their TearDown() releases their EagerPrograms first,
// then calls this one.
template <class Base = ::testing::Test>
class VulkanTemplateTest : public Base {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kVulkanValidationRequested);
    std::string why;
    if (enumerate_vulkan_devices(&why).empty()) GTEST_SKIP() << "no Vulkan device: " << why;
    vk_ = &dynamic_cast<vulkan::VulkanBackend&>(backend_for(BackendKind::Vulkan, 0));
    cpu_ = &backend_for(BackendKind::Ref, 0);
    vulkan::clear_validation_messages();
  }
  void TearDown() override {
    if (!vk_) return;
    EXPECT_TRUE(vulkan::validation_active()) << "the Khronos validation layer is not installed";
    auto messages = vulkan::validation_messages();
    std::string all;
    for (const auto& m : messages) all += m + "\n";
    EXPECT_TRUE(messages.empty()) << messages.size() << " validation message(s):\n" << all;
  }

  vulkan::VulkanBackend* vk_ = nullptr;
  Backend* cpu_ = nullptr;
};

// n values uniform in [-1, 1], seeded.
inline std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// f32 sums of K products of values in [-1, 1]: the error grows with K; 2e-6 * K leaves room for a
// different summation order while any indexing mistake is off by O(1).
inline void expect_close_sums(const std::vector<float>& got, const std::vector<float>& want, int64_t k,
                              const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = 1e-5 + 2e-6 * double(k);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(double(want[i])))) << what << " at " << i;
}

// Runs one f32 op on host data: uploads each input (dims[i]), runs the op through `runner` and
// waits, or without one through the backend's own planner, and downloads its one output. With
// reps > 0, `seconds` gets the best of that many timed runs after the first.
inline std::vector<float> run_f32_op(Backend& backend, EagerPrograms* runner, OpKind kind, const AttrMap& attrs,
                                     const std::vector<std::vector<float>>& inputs,
                                     const std::vector<std::vector<int64_t>>& dims,
                                     const std::vector<int64_t>& out_dims, int reps = 0, double* seconds = nullptr) {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<BufferView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    buffers.push_back(backend.alloc(inputs[i].size() * 4));
    backend.upload(*buffers.back(), inputs[i].data(), inputs[i].size() * 4);
    views.push_back({buffers.back().get(), DType::F32, dims[i]});
  }
  auto out = backend.alloc(size_t(numel(out_dims)) * 4);
  BufferView out_view{out.get(), DType::F32, out_dims};
  const OpRun run{kind, attrs, views, std::span(&out_view, 1)};
  auto once = [&] {
    if (runner) {
      runner->run(run);
      runner->sync();
    } else {
      run_on_backend(backend, run);
    }
  };
  once();
  if (seconds) *seconds = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    once();
    *seconds = std::min(*seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<float> result(size_t(numel(out_dims)));
  backend.download(*out, result.data(), result.size() * 4);
  return result;
}

}  // namespace kiln::testing
