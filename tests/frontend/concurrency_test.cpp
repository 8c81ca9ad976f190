// What docs/architecture.md ("Threads") promises: one compiled function called from several threads
// at once, each with its own batch size; several compiled functions, and eager ops, on one device
// from several threads. Every result is checked against the same math run eagerly on ref before
// the threads start, to 1e-5 relative (the fused kernels reassociate nothing here but the matmul's
// sums, which are the same order on every device).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

constexpr int kThreads = 4;
constexpr int kCallsPerThread = 12;

Tensor mlp(const Tensor& x, const Tensor& w, const Tensor& b) { return relu(matmul(x, w) + b) * 0.5; }

Tensor filled(int64_t rows, int64_t cols, float scale, Device device) {
  std::vector<float> v(size_t(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * float(int(i * 7 % 11) - 5);
  return from_vector(v, {rows, cols}, device);
}

std::vector<Device> devices() {
  std::vector<Device> out{Device::ref(), Device::cpu()};
  if (auto vulkan = testing::vulkan_device()) out.push_back(*vulkan);
  return out;
}

class Threads : public ::testing::TestWithParam<Device> {};

// Thread t calls with batch t + 2, so the function meets four sizes at once: the dim becomes
// symbolic at the second, and every later size reuses that entry. (Batch 1 would add an entry of
// its own: size 1 is always specialized, as torch.compile does.)
TEST_P(Threads, OneCompiledFunctionServesFourThreadsWithDifferentBatchSizes) {
  const Device device = GetParam();
  const Tensor w = filled(8, 16, 0.25f, device), b = reshape(filled(1, 16, 0.5f, device), {16});
  auto f = compile([&](const Tensor& x) { return mlp(x, w, b); });
  std::vector<Tensor> inputs;
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(filled(t + 2, 8, 0.125f * float(t + 1), device));
    expected.push_back(mlp(inputs[t].to(Device::ref()), w.to(Device::ref()), b.to(Device::ref())).to_vector<float>());
  }
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int call = 0; call < kCallsPerThread; ++call) {
          std::vector<float> got = f(inputs[t]).to_vector<float>();
          for (size_t i = 0; i < got.size(); ++i)
            if (std::fabs(got[i] - expected[t][i]) > 1e-5f * (1 + std::fabs(expected[t][i]))) {
              failures[t] = "call " + std::to_string(call) + " element " + std::to_string(i) + ": " +
                            std::to_string(got[i]) + " vs " + std::to_string(expected[t][i]);
              return;
            }
          if (got.size() != expected[t].size()) failures[t] = "wrong size";
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  const CompileStats stats = f.stats();
  EXPECT_EQ(stats.calls, kThreads * kCallsPerThread);
  EXPECT_LE(stats.compiles, 2);  // static at the first size, symbolic from the second
}

// Four compiled functions and four threads of eager ops share one device at the same time.
TEST_P(Threads, CompiledFunctionsAndEagerOpsShareOneDevice) {
  const Device device = GetParam();
  const Tensor w = filled(8, 16, 0.25f, device), b = reshape(filled(1, 16, 0.5f, device), {16});
  const Tensor x = filled(3, 8, 0.5f, device);
  const std::vector<float> expected =
      mlp(x.to(Device::ref()), w.to(Device::ref()), b.to(Device::ref())).to_vector<float>();
  std::vector<std::string> failures(2 * kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2 * kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        const bool compiled = t % 2 == 0;
        auto f = compile([&](const Tensor& in) { return mlp(in, w, b); });
        for (int call = 0; call < kCallsPerThread; ++call) {
          std::vector<float> got = (compiled ? f(x) : mlp(x, w, b)).to_vector<float>();
          for (size_t i = 0; i < got.size(); ++i)
            if (std::fabs(got[i] - expected[i]) > 1e-5f * (1 + std::fabs(expected[i]))) {
              failures[t] = std::string(compiled ? "compiled" : "eager") + " call " + std::to_string(call) +
                            " element " + std::to_string(i);
              return;
            }
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 2 * kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(Devices, Threads, ::testing::ValuesIn(devices()),
                         [](const auto& info) {
                           std::string name = info.param.name();
                           return name.substr(0, name.find(':'));
                         });

}  // namespace
}  // namespace kiln
