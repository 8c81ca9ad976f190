// KernelPrograms: compiled programs by source text.
#include "core/runtime/kernel_programs.h"

namespace kiln {

const Program& KernelPrograms::get(const ProgramSource& source, const CompiledKernelInfo& info) {
  auto it = by_source_.find(source.text);
  if (it == by_source_.end()) {
    it = by_source_.emplace(source.text, backend_->compile(source)).first;
    info_[it->second.get()] = info;
  }
  return *it->second;
}

KernelPrograms compile_kernels(const LoweredProgram& program, Backend& backend) {
  KernelPrograms compiled(backend);
  for (const ProgramKernel& pk : program.kernels)
    for (const ProgramStep& s : pk.steps) {
      const std::string& name = s.kernel.kernel.name;
      compiled.get({name, program.language, s.source},
                   {name, program.language, s.source, s.workgroup_size, false, s.elements_per_invocation});
    }
  return compiled;
}

}  // namespace kiln
