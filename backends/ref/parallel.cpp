// A minimal thread pool: workers wait for a job, each takes chunks until none remain.
#include "backends/ref/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::reference {
namespace {

class Pool {
 public:
  Pool() {
    int n = int(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("KILN_CPU_THREADS")) n = std::atoi(env);
    threads_ = std::max(1, n);
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int threads() const { return threads_; }

  void run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock job_lock(job_mutex_);  // one parallel region at a time
    {
      std::lock_guard lock(mutex_);
      fn_ = &fn;
      n_ = n;
      chunk_ = chunk;
      next_ = 0;
      active_ = int(workers_.size());
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return active_ == 0; });
    fn_ = nullptr;
  }

 private:
  void drain() {
    while (true) {
      int64_t begin = next_.fetch_add(chunk_);
      if (begin >= n_) return;
      (*fn_)(begin, std::min(n_, begin + chunk_));
    }
  }
  void work() {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      drain();
      std::lock_guard lock(mutex_);
      if (--active_ == 0) done_.notify_one();
    }
  }

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mutex_, job_mutex_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  int active_ = 0;
};

Pool& pool() {
  static Pool p;
  return p;
}

thread_local bool t_inside = false;

}  // namespace

int num_threads() { return pool().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // Nested regions and small ranges run inline.
  if (n < 2 * grain || t_inside || pool().threads() == 1) {
    fn(0, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(n / grain, int64_t(pool().threads()) * 4);
  int64_t chunk = (n + chunks - 1) / chunks;
  pool().run(n, chunk, [&](int64_t b, int64_t e) {
    t_inside = true;
    fn(b, e);
    t_inside = false;
  });
}

}  // namespace kiln::reference
