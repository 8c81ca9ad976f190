// plan_program_memory: liveness of a lowered program's values over its kernels, then plan_memory.
#include "core/runtime/program_memory.h"

namespace kiln {

std::vector<int64_t> concrete_dims(const Shape& shape, const std::map<std::string, int64_t>& bindings) {
  std::vector<int64_t> dims;
  for (const SymInt& d : shape) dims.push_back(d.is_static() ? d.value() : d.evaluate(bindings));
  return dims;
}

ProgramMemory plan_program_memory(const std::vector<ProgramValue>& values,
                                  const std::vector<ProgramKernel>& kernels,
                                  const std::map<std::string, int64_t>& bindings, size_t max_buffer_bytes) {
  ProgramMemory memory;
  memory.bindings = bindings;
  memory.plan_index.assign(values.size(), -1);
  auto bytes_of = [&](const ProgramValue& v) {
    return size_t(numel(concrete_dims(v.type.shape, bindings))) * dtype_size(v.type.dtype);
  };
  for (size_t k = 0; k < kernels.size(); ++k) {
    const ProgramKernel& pk = kernels[k];
    for (int w : pk.writes) {
      const ProgramValue& v = values[size_t(w)];
      if (v.storage != ValueStorage::Arena || memory.plan_index[size_t(w)] >= 0) continue;
      memory.plan_index[size_t(w)] = int(memory.values.size());
      memory.values.push_back({v.name, bytes_of(v), int(k), int(k), -1});
      memory.graph_ids.push_back(v.graph_id);
    }
    for (int r : pk.reads) {
      const int planned = memory.plan_index[size_t(storage_value(values, r))];  // a reshape reads its source's bytes
      if (planned >= 0) memory.values[size_t(planned)].last = int(k);
    }
    if (pk.in_place_output >= 0)
      memory.values[size_t(memory.plan_index[size_t(pk.in_place_output)])].in_place_of =
          memory.plan_index[size_t(storage_value(values, pk.in_place_input))];
  }
  // What a kept kernel writes is read again by later runs (kept_kernels.h): alive all along.
  for (const ProgramKernel& pk : kernels)
    if (pk.kept)
      for (int w : pk.writes)
        if (const int planned = memory.plan_index[size_t(w)]; planned >= 0) {
          memory.values[size_t(planned)].first = 0;
          memory.values[size_t(planned)].last = int(kernels.size()) - 1;
        }
  MemoryPlanOptions options;
  options.max_buffer_bytes = max_buffer_bytes;
  memory.plan = plan_memory(memory.values, options);
  return memory;
}

std::map<std::string, int64_t> traced_bindings(const std::vector<TensorType>& input_types) {
  std::map<std::string, int64_t> hints;
  for (const TensorType& t : input_types)
    for (const SymInt& d : t.shape)
      if (!d.is_static()) hints.emplace(d.str(), d.hint());
  return hints;
}

std::string print_program_memory(const ProgramMemory& memory) {
  std::string out = "// " + memory.plan.str() + "\n";
  for (const auto& [symbol, value] : memory.bindings) out += "// " + symbol + " = " + std::to_string(value) + "\n";
  for (size_t i = 0; i < memory.values.size(); ++i) {
    const PlanValue& v = memory.values[i];
    out += v.name + " " + std::to_string(v.bytes) + " bytes, kernels " + std::to_string(v.first) + ".." +
           std::to_string(v.last);
    if (i < memory.plan.placements.size()) {
      const Placement& p = memory.plan.placements[i];
      out += ", arena " + std::to_string(p.arena) + " +" + std::to_string(p.offset);
      if (p.in_place) out += " (in place of " + memory.values[size_t(v.in_place_of)].name + ")";
    }
    out += "\n";
  }
  return out;
}

}  // namespace kiln
