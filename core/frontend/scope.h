// The module scope stack: nn modules push their path ("features.3.conv") while they run, and every
// op records the innermost path in its provenance.
#pragma once

#include <string>

namespace kiln {

const std::string& current_scope();

class ScopeGuard {
 public:
  explicit ScopeGuard(std::string path);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
};

}  // namespace kiln
