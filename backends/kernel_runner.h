// Runs ops eagerly on a code-generating backend: lower the op to kernel IR, print it in the
// backend's dialect, compile once per distinct source (cached), launch with the sizes as push
// constants, wait. Shared by every GPU backend; the cpu backend runs reference kernels instead.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
#include "core/kernel/emit.h"

namespace kiln {

class KernelRunner {
 public:
  KernelRunner(Backend& backend, kernel::Dialect dialect);
  ~KernelRunner();

  void run(const OpRun& run);
  size_t programs_compiled() const { return programs_.size(); }

 private:
  const Program& program_for(const kernel::LoweredKernel& k);

  Backend& backend_;
  kernel::Dialect dialect_;
  std::mutex mutex_;
  std::unique_ptr<Stream> stream_;
  std::unordered_map<std::string, std::unique_ptr<Program>> programs_;  // by source text
};

}  // namespace kiln
