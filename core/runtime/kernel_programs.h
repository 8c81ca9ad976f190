// The backend-compile stage: each distinct kernel source compiled once by the backend, with what
// launches and bundles need to know of it. Kernels of equal text share one program.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "core/runtime/lowered_program.h"

namespace kiln {

struct CompiledKernelInfo {
  std::string name, language, source;
  int workgroup_size = 0;  // 0: set by a template's own source
  bool is_template = false;
  int elements_per_invocation = 1;
  int invocations_per_element = 1;
};

class KernelPrograms {
 public:
  explicit KernelPrograms(Backend& backend) : backend_(&backend) {}
  // The program for `source`, compiled on the first request for that text.
  const CompiledKernel& get(const KernelSource& source, const CompiledKernelInfo& info);
  // A generic step's program (emitted in `language`), compiled on the first request for its source.
  const CompiledKernel& get(const ProgramStep& step, const std::string& language);
  // The workgroups a generic step's `program` needs for `elements` iterations.
  std::array<uint32_t, 3> groups(const CompiledKernel* program, int64_t elements) const;
  size_t size() const { return by_source_.size(); }
  // Compiles every source not compiled yet in one Backend::compile_all call.
  void compile_all(const std::vector<std::pair<KernelSource, CompiledKernelInfo>>& kernels);
  const CompiledKernelInfo& info(const CompiledKernel* program) const { return info_.at(program); }

 private:
  Backend* backend_;
  std::map<std::string, std::unique_ptr<CompiledKernel>> by_source_;
  std::map<const CompiledKernel*, CompiledKernelInfo> info_;
};

// A step's parameter values as push-constant bytes.
std::vector<uint8_t> push_constant_bytes(const std::vector<int32_t>& params);

// Compiles every step's emitted source (emit_program first).
KernelPrograms compile_kernels(const LoweredProgram& program, Backend& backend);

}  // namespace kiln
