// Lazy mode: how a compiled function with graph breaks runs. The function runs as ordinary code,
// but every op is recorded instead of run; reading a recorded tensor's data (item(), to_vector(),
// .to(another device)) or returning from the function flushes the recorded segment. A segment is
// keyed by its structure (text IR and input types) and compiled once, so later calls that record
// the same segment replay its program; only the host code between segments runs each call.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"
#include "core/frontend/tracer.h"
#include "core/runtime/program.h"

namespace kiln {

struct LazyStats {
  int64_t segments_compiled = 0;  // distinct segments built into programs
  int64_t segment_runs = 0;       // segments executed (cached or not)
};

class LazySegments {
 public:
  explicit LazySegments(Device device, ProgramOptions options = {});
  ~LazySegments();
  LazySegments(const LazySegments&) = delete;
  LazySegments& operator=(const LazySegments&) = delete;

  // Runs fn with recording on for this thread, then flushes: the tensors fn returns are concrete.
  std::vector<Tensor> run(const std::function<std::vector<Tensor>()>& fn);
  // Executes what was recorded since the last flush and makes every recorded tensor still alive
  // concrete (it gets the program's output buffer); the next op starts a new segment.
  void flush();

  // The tracer of the current segment (a new one after each flush).
  Tracer* recording();

  const LazyStats& stats() const { return stats_; }
  const ProgramStats* last_program() const { return last_program_; }

 private:
  Device device_;
  ProgramOptions options_;
  std::unique_ptr<Tracer> tracer_;
  std::map<std::string, std::unique_ptr<DeviceProgram>> programs_;  // by segment key
  LazyStats stats_;
  const ProgramStats* last_program_ = nullptr;
};

// The tracer recording this thread's lazy segment, or null outside LazySegments::run.
Tracer* lazy_tracer();
// Runs what this thread's lazy segment recorded so far (nothing outside LazySegments::run).
void flush_lazy();

}  // namespace kiln
