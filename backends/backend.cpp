// Default implementations of the optional backend slots.
#include "backends/backend.h"

#include <atomic>

#include "core/support/error.h"

namespace kiln {

uint64_t Buffer::new_serial() {
  static std::atomic<uint64_t> next_serial{1};
  return next_serial.fetch_add(1, std::memory_order_relaxed);
}

void MemoryCounter::add(int64_t bytes) {
  const int64_t now = allocated_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

std::unique_ptr<Buffer> Backend::alloc(size_t bytes) {
  std::unique_ptr<Buffer> buffer = allocate(bytes);
  buffer->counter_ = memory_;
  memory_->add(int64_t(buffer->bytes_));
  return buffer;
}

std::unique_ptr<CompiledKernel> Backend::compile(const KernelSource& source) {
  throw Error("compiling " + source.language + " programs is not supported by backend " + name());
}

std::vector<std::unique_ptr<CompiledKernel>> Backend::compile_all(const std::vector<KernelSource>& sources) {
  std::vector<std::unique_ptr<CompiledKernel>> programs;
  for (const KernelSource& s : sources) programs.push_back(compile(s));
  return programs;
}

std::unique_ptr<Stream> Backend::create_stream() {
  throw Error("streams are not supported by backend " + name());
}

void Backend::execute(const OpRun& run) {
  throw Error("backend " + name() + " runs eager ops as one-node programs (kiln::run_on_backend), not through execute(); op " +
              std::string(op_name(run.kind)));
}

EagerExecutor& Backend::attach_eager_executor(const std::function<std::unique_ptr<EagerExecutor>()>& make) {
  std::lock_guard lock(eager_mutex_);
  if (!eager_) {
    eager_ = make();
    eager_ready_.store(eager_.get(), std::memory_order_release);
  }
  return *eager_;
}

void Backend::sync_eager() {
  if (EagerExecutor* executor = eager_executor()) executor->sync();
}

EagerStats Backend::eager_stats() const {
  const EagerExecutor* executor = eager_executor();
  return executor ? executor->stats() : EagerStats{};
}

void Backend::release_eager_executor() {
  std::lock_guard lock(eager_mutex_);
  eager_ready_.store(nullptr, std::memory_order_release);
  eager_.reset();
}

}  // namespace kiln
