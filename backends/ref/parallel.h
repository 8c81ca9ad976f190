// parallel_for over [0, n) in chunks on a small fixed pool of threads (one per core).
#pragma once

#include <cstdint>
#include <functional>

namespace kiln::reference {

// Elements (or element-sized steps of work) a parallel chunk takes at least: fewer run on the
// calling thread, where waking the pool would cost more than it saves.
constexpr int64_t kParallelGrain = 1 << 14;

// Calls fn(begin, end) on disjoint ranges covering [0, n); runs inline when n < grain.
// fn must not throw; report errors through shared state and throw after.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
int num_threads();

}  // namespace kiln::reference
