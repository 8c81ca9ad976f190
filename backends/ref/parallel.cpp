// parallel_for on OpenMP's team: the team oneDNN's primitives and the cpu backend's generated
// kernels run on, so eager reference kernels between them never compete with its threads for the
// cores (a pool of kiln's own found them spinning there, idle, after each oneDNN call), and a region
// starts without a wake-up through the kernel when the team is still spinning.
#include "backends/ref/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace kiln::reference {
namespace {

int configured_threads() {
  int n = int(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("KILN_CPU_THREADS")) n = std::atoi(env);
  return std::max(1, n);
}

thread_local bool t_inside = false;

}  // namespace

int num_threads() {
  static const int threads = configured_threads();
  return threads;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // Nested regions and small ranges run inline.
  if (n < 2 * grain || t_inside || num_threads() == 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(n / grain, int64_t(num_threads()) * 4);
  const int64_t chunk = (n + chunks - 1) / chunks;
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(num_threads())
  {
    t_inside = true;
    for (int64_t begin = next.fetch_add(chunk); begin < n; begin = next.fetch_add(chunk))
      fn(begin, std::min(n, begin + chunk));
    t_inside = false;
  }
}

}  // namespace kiln::reference
