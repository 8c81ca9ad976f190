// Default implementations of the optional backend slots.
#include "backends/backend.h"

#include "core/support/error.h"

namespace kiln {

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

std::unique_ptr<Program> Backend::compile(const ProgramSource& source) {
  throw Error("compiling " + source.language + " programs is not supported by backend " + name());
}

std::vector<std::unique_ptr<Program>> Backend::compile_all(const std::vector<ProgramSource>& sources) {
  std::vector<std::unique_ptr<Program>> programs;
  for (const ProgramSource& s : sources) programs.push_back(compile(s));
  return programs;
}

std::unique_ptr<Stream> Backend::create_stream() {
  throw Error("streams are not supported by backend " + name());
}

}  // namespace kiln
