// KernelPrograms: compiled programs by source text.
#include "core/runtime/kernel_programs.h"

#include <set>

namespace kiln {

const Program& KernelPrograms::get(const ProgramSource& source, const CompiledKernelInfo& info) {
  auto it = by_source_.find(source.text);
  if (it == by_source_.end()) {
    it = by_source_.emplace(source.text, backend_->compile(source)).first;
    info_[it->second.get()] = info;
  }
  return *it->second;
}

void KernelPrograms::compile_all(const std::vector<std::pair<ProgramSource, CompiledKernelInfo>>& kernels) {
  std::vector<ProgramSource> sources;
  std::vector<const CompiledKernelInfo*> infos;
  std::set<std::string> batched;
  for (const auto& [source, info] : kernels)
    if (!by_source_.count(source.text) && batched.insert(source.text).second) {
      sources.push_back(source);
      infos.push_back(&info);
    }
  if (sources.empty()) return;
  std::vector<std::unique_ptr<Program>> programs = backend_->compile_all(sources);
  for (size_t i = 0; i < sources.size(); ++i) {
    info_[programs[i].get()] = *infos[i];
    by_source_.emplace(sources[i].text, std::move(programs[i]));
  }
}

KernelPrograms compile_kernels(const LoweredProgram& program, Backend& backend) {
  KernelPrograms compiled(backend);
  std::vector<std::pair<ProgramSource, CompiledKernelInfo>> kernels;
  for (const ProgramKernel& pk : program.kernels)
    for (const ProgramStep& s : pk.steps) {
      const std::string& name = s.kernel.kernel.name;
      kernels.push_back({{name, program.language, s.source},
                         {name, program.language, s.source, s.workgroup_size, false, s.elements_per_invocation,
                          s.invocations_per_element}});
    }
  compiled.compile_all(kernels);
  return compiled;
}

}  // namespace kiln
