// KernelPrograms: compiled programs by source text.
#include "core/runtime/kernel_programs.h"

#include <cstring>
#include <set>

#include "core/kernel/emit.h"

namespace kiln {

const CompiledKernel& KernelPrograms::get(const KernelSource& source, const CompiledKernelInfo& info) {
  auto it = by_source_.find(source.text);
  if (it == by_source_.end()) {
    it = by_source_.emplace(source.text, backend_->compile(source)).first;
    info_[it->second.get()] = info;
  }
  return *it->second;
}

namespace {

CompiledKernelInfo info_of(const ProgramStep& step, const std::string& language) {
  return {step.kernel.kernel.name, language, step.source, step.workgroup_size, false, step.elements_per_invocation,
          step.invocations_per_element};
}

}  // namespace

const CompiledKernel& KernelPrograms::get(const ProgramStep& step, const std::string& language) {
  return get({step.kernel.kernel.name, language, step.source}, info_of(step, language));
}

std::array<uint32_t, 3> KernelPrograms::groups(const CompiledKernel* program, int64_t elements) const {
  const CompiledKernelInfo& i = info(program);
  return kernel::launch_groups(elements, i.workgroup_size, i.elements_per_invocation, i.invocations_per_element);
}

std::vector<uint8_t> push_constant_bytes(const std::vector<int32_t>& params) {
  std::vector<uint8_t> bytes(params.size() * sizeof(int32_t));
  if (!params.empty()) std::memcpy(bytes.data(), params.data(), bytes.size());
  return bytes;
}

void KernelPrograms::compile_all(const std::vector<std::pair<KernelSource, CompiledKernelInfo>>& kernels) {
  std::vector<KernelSource> sources;
  std::vector<const CompiledKernelInfo*> infos;
  std::set<std::string> batched;
  for (const auto& [source, info] : kernels)
    if (!by_source_.count(source.text) && batched.insert(source.text).second) {
      sources.push_back(source);
      infos.push_back(&info);
    }
  if (sources.empty()) return;
  std::vector<std::unique_ptr<CompiledKernel>> programs = backend_->compile_all(sources);
  for (size_t i = 0; i < sources.size(); ++i) {
    info_[programs[i].get()] = *infos[i];
    by_source_.emplace(sources[i].text, std::move(programs[i]));
  }
}

KernelPrograms compile_kernels(const LoweredProgram& program, Backend& backend) {
  KernelPrograms compiled(backend);
  std::vector<std::pair<KernelSource, CompiledKernelInfo>> kernels;
  for (const ProgramKernel& pk : program.kernels)
    for (const ProgramStep& s : pk.steps)
      kernels.push_back({{s.kernel.kernel.name, program.language, s.source}, info_of(s, program.language)});
  compiled.compile_all(kernels);
  return compiled;
}

}  // namespace kiln
