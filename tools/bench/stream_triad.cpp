// STREAM's triad on host threads (stream_triad.h). CMake compiles this file with -O3: at -O2 GCC
// 12 leaves the loop scalar, which moves about half the bytes a vectorized one does on the same
// memory, and the benchmarks' ratios to the triad would flatter every kernel.
#include "tools/bench/stream_triad.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln::bench {

namespace {

void triad_slice(float* __restrict a, const float* __restrict b, const float* __restrict c, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}

}  // namespace

double stream_triad_gbs(size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  auto run_once = [&] {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t begin = n * t / threads, end = n * (t + 1) / threads;
        triad_slice(a.data() + begin, b.data() + begin, c.data() + begin, end - begin);
      });
    for (std::thread& thread : pool) thread.join();
  };
  run_once();
  std::vector<double> seconds;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const auto start = std::chrono::steady_clock::now();
    run_once();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return 3.0 * double(n * sizeof(float)) / seconds[seconds.size() / 2] / 1e9;
}

}  // namespace kiln::bench
