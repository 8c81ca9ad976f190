// mark_kept_kernels: which kernels read only what stays unchanged between runs.
#include "core/runtime/kept_kernels.h"

#include <algorithm>
#include <set>

namespace kiln {

void mark_kept_kernels(LoweredProgram& program, const ProgramOptions& options) {
  const bool enabled = !options.reduce_overhead;
  std::set<size_t> parameters(options.parameter_inputs.begin(), options.parameter_inputs.end());
  for (const OutputOverInput& p : program.outputs_over_inputs) parameters.erase(p.input);  // written over
  auto unchanging = [&](int value) {
    const ProgramValue& v = program.values[size_t(storage_value(program.values, value))];
    return v.storage == ValueStorage::Constant ||
           (v.storage == ValueStorage::Input && parameters.count(size_t(v.index)));
  };
  auto intermediate = [&](int value) {
    const ProgramValue& v = program.values[size_t(value)];
    return v.storage == ValueStorage::Arena && v.alias_of < 0;
  };
  for (ProgramKernel& k : program.kernels) {
    k.kept = enabled && !k.reads.empty() && k.in_place_output < 0 &&
             std::all_of(k.reads.begin(), k.reads.end(), unchanging) &&
             std::all_of(k.writes.begin(), k.writes.end(), intermediate);
  }
}

}  // namespace kiln
