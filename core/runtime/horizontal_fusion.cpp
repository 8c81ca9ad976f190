// fuse_horizontal: runs of independent small pointwise kernels become one horizontal kernel.
#include "core/runtime/horizontal_fusion.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace kiln {
namespace {

using kernel::Expr;
using kernel::ExprKind;
using kernel::ExprRef;
using kernel::Kernel;

bool is_16_bit(DType t) { return t == DType::F16 || t == DType::BF16; }

// True when the expression reads nothing but its kernel's linear index (in a rank-1 kernel also
// coordinate 0, the same number), constants and loads at offsets built from those: it computes
// element i from element i of its operands (or fixed ones), so it can run over any stretch of a
// flat index.
bool position_free(const ExprRef& root, int rank) {
  std::set<const Expr*> seen;
  std::function<bool(const ExprRef&)> walk = [&](const ExprRef& e) {
    if (!seen.insert(e.get()).second) return true;
    switch (e->kind) {
      case ExprKind::Param: case ExprKind::ReductionIndex: case ExprKind::Accumulator: return false;
      case ExprKind::Coord: return e->index < 0 || (rank == 1 && e->index == 0);
      default: break;
    }
    return std::all_of(e->args.begin(), e->args.end(), walk);
  };
  return walk(root);
}

// A pointwise kernel's iteration size: the product of its dims (params 0..rank-1).
SymInt iteration_size(const kernel::LoweredKernel& lk) {
  SymInt elements(1);
  for (int d = 0; d < lk.kernel.rank; ++d) elements = elements * lk.params[size_t(d)];
  return elements;
}

// A kernel that may become a segment: one plain pointwise step, position free, within the size cap.
bool joinable(const ProgramKernel& pk, const kernel::CodegenTarget& target, const HorizontalFusionOptions& options) {
  if (pk.steps.size() != 1 || pk.template_op || pk.in_place_output >= 0) return false;
  const kernel::LoweredKernel& lk = pk.steps[0].kernel;
  const Kernel& k = lk.kernel;
  if (k.kind != kernel::KernelKind::Pointwise || !k.segments.empty() || k.stores.empty()) return false;
  for (const kernel::BufferSlot& b : k.buffers)
    if (target.texel_reads && is_16_bit(b.dtype)) return false;  // its inputs would all be storage buffers
  if (iteration_size(lk).hint() > options.max_elements) return false;
  return std::all_of(k.stores.begin(), k.stores.end(),
                     [&k](const kernel::Store& s) { return position_free(s.value, k.rank); });
}

// A copy of e with every load's buffer slot renumbered through `slot`, and coordinate 0 (of a
// rank-1 kernel) as the linear index it equals.
ExprRef renumber_loads(const ExprRef& e, const std::vector<int>& slot, std::map<const Expr*, ExprRef>& memo) {
  auto it = memo.find(e.get());
  if (it != memo.end()) return it->second;
  auto copy = std::make_shared<Expr>(*e);
  for (ExprRef& a : copy->args) a = renumber_loads(a, slot, memo);
  if (copy->kind == ExprKind::Load) copy->index = slot.at(size_t(e->index));
  if (copy->kind == ExprKind::Coord) copy->index = -1;
  memo[e.get()] = copy;
  return copy;
}

// Whether a kernel writing `v` may run earlier than it was scheduled: a program output (new
// parameters, optimizer state, gradients) or a small intermediate, such as an optimizer's scalars.
// A larger intermediate made earlier would be held in memory longer.
bool movable_value(const ProgramValue& v) {
  constexpr int64_t kMovableBytes = 16 << 10;
  if (v.storage != ValueStorage::Arena) return true;
  return numel(v.type.shape).hint() * int64_t(dtype_size(v.type.dtype)) <= kMovableBytes;
}

// The horizontal kernel being built: its members' slots merged by value number.
class HorizontalKernel {
 public:
  HorizontalKernel(const kernel::CodegenTarget& target, const HorizontalFusionOptions& options)
      : target_(&target), options_(&options) {}

  // Whether `pk` fits the target's limits with the members so far.
  bool fits(const ProgramKernel& pk, const LoweredProgram& program) const {
    // Params: the extent, then each segment's start (but the first's) and size.
    if (int(members_.size()) + 1 > std::min(options_->max_segments, target_->max_params / 2)) return false;
    std::set<int> inputs(inputs_.begin(), inputs_.end());
    inputs.insert(pk.reads.begin(), pk.reads.end());
    const size_t outputs = outputs_.size() + pk.writes.size();
    size_t texels = 0;
    for (int v : inputs) texels += target_->texel_reads && texel_type(program.values[size_t(v)].type.dtype);
    const size_t storage = outputs + inputs.size() - texels;
    return int(inputs.size() + outputs) <= target_->max_buffers && int(storage) <= target_->max_storage_buffers &&
           int(texels) <= target_->max_texel_buffers;
  }

  void add(size_t index, const ProgramKernel& pk) {
    members_.push_back(index);
    for (int v : pk.reads)
      if (std::find(inputs_.begin(), inputs_.end(), v) == inputs_.end()) inputs_.push_back(v);
    outputs_.insert(outputs_.end(), pk.writes.begin(), pk.writes.end());
  }

  // The merged kernel: slots are the members' inputs (each value once), then their outputs.
  ProgramKernel build(const std::vector<ProgramKernel>& kernels) const {
    std::vector<int> args = inputs_;
    args.insert(args.end(), outputs_.begin(), outputs_.end());
    std::map<int, int> slot_of;
    for (size_t i = 0; i < args.size(); ++i) slot_of.emplace(args[i], int(i));

    Kernel merged;
    merged.kind = kernel::KernelKind::Pointwise;
    merged.rank = 1;
    merged.segment_alignment = target_->vec4_pointwise ? 4 : 1;  // vec4 GLSL keeps 4 elements per invocation
    const int n = int(members_.size());
    kernel::LoweredKernel lowered;
    lowered.params.assign(size_t(2 * n), SymInt(0));
    SymInt extent(0);
    for (int m = 0; m < n; ++m) {
      const ProgramStep& step = kernels[members_[size_t(m)]].steps[0];
      const Kernel& k = step.kernel.kernel;
      std::vector<int> slot;
      for (int value : step.args) slot.push_back(slot_of.at(value));
      std::map<const Expr*, ExprRef> memo;
      kernel::Segment segment;
      segment.start = m == 0 ? -1 : m;
      segment.size = n + m;
      for (const kernel::Store& s : k.stores)
        segment.stores.push_back({slot.at(size_t(s.buffer)), renumber_loads(s.value, slot, memo)});
      merged.segments.push_back(std::move(segment));
      const SymInt elements = iteration_size(step.kernel);
      if (m > 0) lowered.params[size_t(m)] = extent;
      lowered.params[size_t(n + m)] = elements;
      const int64_t align = merged.segment_alignment;
      extent = extent + (align == 1 ? elements : (elements + (align - 1)) / align * align);
    }
    lowered.params[0] = extent;
    merged.num_params = int(lowered.params.size());
    for (int value : args) {
      const bool output = slot_of.at(value) >= int(inputs_.size());
      merged.buffers.push_back({slot_dtype(kernels, value), output});
    }
    merged.name = "horizontal" + std::to_string(n) + "_" + kernels[members_[0]].steps[0].kernel.kernel.name;
    lowered.kernel = std::move(merged);

    ProgramKernel out;
    out.reads = inputs_;
    out.writes = outputs_;
    out.steps.push_back({std::move(lowered), args, "", {}, 0, 1});
    return out;
  }

 private:
  static bool texel_type(DType t) { return t == DType::F32 || t == DType::I32; }

  // A slot's dtype, as the member that binds it declared it.
  DType slot_dtype(const std::vector<ProgramKernel>& kernels, int value) const {
    for (size_t m : members_) {
      const ProgramStep& step = kernels[m].steps[0];
      for (size_t i = 0; i < step.args.size(); ++i)
        if (step.args[i] == value) return step.kernel.kernel.buffers[i].dtype;
    }
    return DType::F32;
  }

  const kernel::CodegenTarget* target_;
  const HorizontalFusionOptions* options_;
  std::vector<size_t> members_;
  std::vector<int> inputs_, outputs_;
};

PlannedKernel merged_info(const std::vector<PlannedKernel>& info, const std::vector<size_t>& members,
                          const std::string& name) {
  PlannedKernel out;
  out.name = name;
  std::set<int> origins, reads;
  for (size_t m : members) {
    const PlannedKernel& k = info[m];
    origins.insert(k.origins.begin(), k.origins.end());
    out.nodes.insert(out.nodes.end(), k.nodes.begin(), k.nodes.end());
    for (int r : k.reads)
      if (reads.insert(r).second) out.reads.push_back(r);
    out.writes.insert(out.writes.end(), k.writes.begin(), k.writes.end());
  }
  out.origins.assign(origins.begin(), origins.end());
  return out;
}

}  // namespace

int fuse_horizontal(LoweredProgram& program, const kernel::CodegenTarget& target,
                    const HorizontalFusionOptions& options) {
  if (!options.enabled || program.kernels.size() < 2) return 0;
  std::vector<int> producer(program.values.size(), -1);  // kernel writing each value
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (int v : program.kernels[k].writes) producer[size_t(v)] = int(k);

  // Groups in launch order: one kernel that joins nothing, or a horizontal kernel's members, which
  // run at the group's place. A kernel joins the earliest horizontal group since the last kernel
  // that joins nothing (no kernel moves past another one's launch) whose place every value it
  // reads is made before.
  struct Group {
    std::vector<size_t> members;
    std::optional<HorizontalKernel> horizontal;
  };
  std::vector<Group> groups;
  std::vector<int> made_in(program.values.size(), -1);  // the group writing each value; -1: none
  size_t window = 0;  // the first group after the last kernel that joins nothing
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const ProgramKernel& pk = program.kernels[k];
    int chosen = -1;
    if (joinable(pk, target, options)) {
      const bool movable = std::all_of(pk.writes.begin(), pk.writes.end(),
                                       [&](int v) { return movable_value(program.values[size_t(v)]); });
      const size_t earliest = movable || groups.empty() ? window : std::max(window, groups.size() - 1);
      for (size_t g = earliest; g < groups.size() && chosen < 0; ++g) {
        const bool ready = std::all_of(pk.reads.begin(), pk.reads.end(), [&](int v) {
          return made_in[size_t(storage_value(program.values, v))] < int(g);  // a reshape: its source's writer
        });
        if (groups[g].horizontal && ready && groups[g].horizontal->fits(pk, program)) chosen = int(g);
      }
      if (chosen < 0) {
        groups.push_back({{}, HorizontalKernel(target, options)});
        chosen = int(groups.size()) - 1;
      }
      groups[size_t(chosen)].horizontal->add(k, pk);
    } else {
      groups.push_back({});
      chosen = int(groups.size()) - 1;
      window = groups.size();
    }
    groups[size_t(chosen)].members.push_back(k);
    for (int v : pk.writes) made_in[size_t(v)] = chosen;
  }

  int saved = 0;
  std::vector<ProgramKernel> kernels;
  std::vector<PlannedKernel> info;
  for (const Group& entry : groups) {
    const std::vector<size_t>& group = entry.members;
    if (group.size() == 1) {
      kernels.push_back(std::move(program.kernels[group[0]]));
      info.push_back(std::move(program.kernel_info[group[0]]));
      continue;
    }
    ProgramKernel merged = entry.horizontal->build(program.kernels);
    info.push_back(merged_info(program.kernel_info, group, merged.steps[0].kernel.kernel.name));
    kernels.push_back(std::move(merged));
    saved += int(group.size()) - 1;
  }
  program.kernels = std::move(kernels);
  program.kernel_info = std::move(info);
  return saved;
}

std::string print_horizontal(const LoweredProgram& program) {
  std::string out;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const ProgramKernel& pk = program.kernels[k];
    if (pk.steps.size() != 1 || pk.steps[0].kernel.kernel.segments.empty()) continue;
    const kernel::LoweredKernel& lk = pk.steps[0].kernel;
    out += "kernel " + std::to_string(k) + " horizontal: " + std::to_string(lk.kernel.segments.size()) +
           " segments over " + lk.params[0].str() + " elements, nodes";
    for (const PlannedNode& n : program.kernel_info[k].nodes)
      out += " %" + std::to_string(n.outputs.empty() ? -1 : n.outputs[0]) + " " + std::string(op_name(n.kind));
    out += "\n";
  }
  return out.empty() ? "no horizontal kernels\n" : out;
}

}  // namespace kiln
