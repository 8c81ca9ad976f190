// safe_outputs_over_inputs: where a program may write an output over an input's buffer.
#include "core/runtime/donation.h"

#include <functional>
#include <set>

#include "core/runtime/lowered_program.h"

namespace kiln {
namespace {

// Whether `value` loads a slot in `slots` (*loads), and whether one such load is not at the linear
// index (*not_linear). Expressions in `seen` are skipped: emission computes a shared expression
// once, where a store first uses it, and later stores reuse its value.
void scan_loads(const kernel::ExprRef& value, const std::set<int>& slots, std::set<const kernel::Expr*>& seen,
                bool* loads, bool* not_linear) {
  std::function<void(const kernel::ExprRef&)> walk = [&](const kernel::ExprRef& e) {
    if (!e || !seen.insert(e.get()).second) return;
    if (e->kind == kernel::ExprKind::Load && slots.count(e->index)) {
      *loads = true;
      const kernel::ExprRef& offset = e->args[0];
      if (!(offset->kind == kernel::ExprKind::Coord && offset->index == -1)) *not_linear = true;
    }
    for (const kernel::ExprRef& a : e->args) walk(a);
  };
  walk(value);
}

// Whether `kernel` stores slot `out` once, loading the slots in `in` only at the linear index and
// only for that store or the stores before it (in emission order): the generated code has read each
// element of the input it needs before the store overwrites it. In a horizontal kernel, the input's
// loads must all be in the output's segment.
bool reads_before_overwriting(const kernel::Kernel& kernel, int out, const std::set<int>& in) {
  if (kernel.kind != kernel::KernelKind::Pointwise) return false;
  std::vector<const std::vector<kernel::Store>*> lists;
  if (kernel.segments.empty()) lists.push_back(&kernel.stores);
  for (const kernel::Segment& s : kernel.segments) lists.push_back(&s.stores);
  bool found = false;
  for (const std::vector<kernel::Store>* stores : lists) {
    bool has_out = false, past_out = false;
    for (const kernel::Store& s : *stores) has_out = has_out || s.buffer == out;
    std::set<const kernel::Expr*> seen;
    for (const kernel::Store& s : *stores) {
      bool loads = false, not_linear = false;
      scan_loads(s.value, in, seen, &loads, &not_linear);
      if (not_linear || (loads && (!has_out || past_out))) return false;
      if (s.buffer == out) {
        if (past_out) return false;  // stored twice
        past_out = true;
      }
    }
    if (has_out) {
      if (found) return false;
      found = true;
    }
  }
  return found;
}

}  // namespace

std::vector<OutputOverInput> safe_outputs_over_inputs(const LoweredProgram& program,
                                                      const std::vector<OutputOverInput>& candidates) {
  std::vector<OutputOverInput> safe;
  std::set<size_t> inputs_taken;
  for (const OutputOverInput& c : candidates) {
    if (c.output >= program.output_values.size() || c.input >= program.input_types.size() ||
        inputs_taken.count(c.input))
      continue;
    const int out = program.output_values[c.output];
    const ProgramValue& out_value = program.values[size_t(out)];
    int in = -1;
    for (size_t v = 0; v < program.values.size(); ++v)
      if (program.values[v].storage == ValueStorage::Input && size_t(program.values[v].index) == c.input) in = int(v);
    if (in < 0 || out_value.storage != ValueStorage::Output) continue;
    const TensorType& in_type = program.values[size_t(in)].type;
    if (dtype_size(in_type.dtype) != dtype_size(out_value.type.dtype) ||
        shape_str(in_type.shape) != shape_str(out_value.type.shape))
      continue;
    // Returned once (a value returned twice is one tensor), and the input is not returned itself
    // (its output copy runs after every kernel).
    int returned = 0;
    bool input_returned = false;
    for (int v : program.output_values) {
      returned += v == out;
      input_returned = input_returned || v == in;
    }
    if (returned != 1 || input_returned) continue;
    // The output's kernel: one generated step, and no kernel after it reads the input.
    int writer = -1, last_reader = -1;
    for (size_t k = 0; k < program.kernels.size(); ++k) {
      const ProgramKernel& pk = program.kernels[k];
      for (int w : pk.writes)
        if (w == out) writer = int(k);
      for (int r : pk.reads)
        if (r == in) last_reader = int(k);
    }
    if (writer < 0 || last_reader > writer) continue;
    const ProgramKernel& pk = program.kernels[size_t(writer)];
    if (pk.template_op || pk.steps.size() != 1) continue;
    const ProgramStep& step = pk.steps[0];
    std::set<int> in_slots;
    int out_slot = -1;
    for (size_t s = 0; s < step.args.size(); ++s) {
      if (step.args[s] == in) in_slots.insert(int(s));
      if (step.args[s] == out) out_slot = int(s);
    }
    if (out_slot < 0 || !reads_before_overwriting(step.kernel.kernel, out_slot, in_slots)) continue;
    safe.push_back(c);
    inputs_taken.insert(c.input);
  }
  return safe;
}

std::string print_outputs_over_inputs(const LoweredProgram& program, const std::vector<OutputOverInput>& pairs) {
  std::string text;
  for (const OutputOverInput& p : pairs) {
    const ProgramValue& out = program.values[size_t(program.output_values[p.output])];
    text += "output " + std::to_string(p.output) + " over input " + std::to_string(p.input) + " (" + out.name + ")\n";
  }
  return text;
}

}  // namespace kiln
