// LoweredProgram: a graph compiled for one backend, as plain data. Every value a launch binds (graph
// inputs, constants, intermediates, outputs, kernel scratch), every kernel with its kernel IR steps
// and, after emission, their generated source. compile_graph's stages build it (lower_schedule,
// emit_program); PlannedProgram, the executor, runs it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/graph.h"
#include "core/kernel/dialect.h"
#include "core/kernel/lower.h"
#include "core/runtime/donation.h"
#include "core/runtime/schedule.h"

namespace kiln::kernel {
struct EmitOptions;  // core/kernel/emit.h
}  // namespace kiln::kernel

namespace kiln {

// A graph node a kernel computes, kept so checks can run a kernel's ops again on the reference (ref).
struct PlannedNode {
  int id = 0;
  OpKind kind = OpKind::Constant;
  AttrMap attrs;
  Provenance provenance;
  std::vector<int> inputs, outputs;  // graph value ids
};

// What a kernel is, in graph terms: for accuracy checks, bundles and the debugger.
struct PlannedKernel {
  std::string name;
  std::vector<int> origins;          // graph node ids its expressions compute (from the kernel IR)
  std::vector<PlannedNode> nodes;    // its fusion group, in topological order
  std::vector<int> reads, writes;    // graph value ids it loads / stores (scratch not included)
};

enum class ValueStorage { Input, Constant, Arena, Output };

// A buffer a launch binds. Values are numbered by their index in LoweredProgram::values.
struct ProgramValue {
  TensorType type;
  ValueStorage storage = ValueStorage::Arena;
  int index = -1;  // graph input / constant / graph output number; Arena: set by the memory plan
  std::string name;
  int graph_id = -1;  // the graph value's id; -1 for kernel scratch
  // A reshape of an intermediate: no kernel writes it; it is the bytes of value `alias_of` read
  // with its own shape (an intermediate is row-major, so a reshape is the same bytes).
  int alias_of = -1;
};

// The value whose bytes `value` is: itself, or the intermediate it reshapes.
inline int storage_value(const std::vector<ProgramValue>& values, int value) {
  while (values[size_t(value)].alias_of >= 0) value = values[size_t(value)].alias_of;
  return value;
}

// One generated launch of a kernel.
struct ProgramStep {
  kernel::LoweredKernel kernel;
  std::vector<int> args;  // value numbers bound to the kernel's slots
  // Set by emission. Kept per step: kernels of equal text share one compiled program.
  std::string source;
  std::vector<std::vector<int>> line_origins;  // per source line: origin node ids
  int workgroup_size = 0;
  int elements_per_invocation = 1;
  int invocations_per_element = 1;  // a cooperative reduction's workgroup (EmittedKernel)
};

// One kernel of the schedule: its generic steps, and the lone op a template may replace them with.
struct ProgramKernel {
  std::vector<ProgramStep> steps;
  // Kept by value: the graph may be gone when a new input shape plans the template again.
  std::optional<std::pair<OpKind, AttrMap>> template_op;
  // The pointwise chain the template takes after template_op (Backend::plan_fused_template).
  struct EpilogueOp {
    OpKind kind = OpKind::Relu;
    AttrMap attrs;
    int operand = -1;  // index into node_inputs, or -1 for a unary op
    bool operand_first = false;
  };
  std::vector<EpilogueOp> template_epilogue;
  // The template's operands' value numbers: template_op's inputs then the epilogue's operands; its
  // outputs (the epilogue's last value when there is one).
  std::vector<int> node_inputs, node_outputs;
  // Per input of template_op: the views (reshape, permute, expand, slice) the template reads it through,
  // in place, from the value node_inputs names; empty where it reads that value as it is.
  struct ViewOp {
    OpKind kind = OpKind::Reshape;
    AttrMap attrs;
    Shape out_shape;
  };
  std::vector<std::vector<ViewOp>> input_views;
  std::vector<int> reads, writes;              // value numbers (writes include scratch)
  int in_place_output = -1, in_place_input = -1;  // a pointwise store over an input it reads
  // Reads only what stays unchanged between runs; its results are kept (kept_kernels.h).
  bool kept = false;
};

struct ProgramConstant {
  int value = 0;    // value number
  int node_id = 0;  // the constant node
  Literal literal;
};

struct LoweredProgram {
  std::vector<TensorType> input_types;  // graph inputs, in order
  std::vector<ProgramValue> values;
  std::vector<int> output_values;       // value number per graph output
  std::vector<ProgramKernel> kernels;   // in launch order
  std::vector<PlannedKernel> kernel_info;  // parallel to kernels
  std::vector<ProgramConstant> constants;
  int64_t graph_nodes = 0;
  std::vector<OutputOverInput> outputs_over_inputs;  // the safe ones of ProgramOptions' (donation.h)
  std::string language;  // what emission wrote the sources in ("glsl", "cuda")
};

// Lowering: every scheduled kernel to kernel IR (kernel/lower_group.h), its values numbered, and
// in-place pairs found. A kernel of reshapes only, of an intermediate that is not returned, is no
// kernel: its value aliases the intermediate (ProgramValue::alias_of). Throws kiln::Error naming
// the op and its source line when a group has no lowering.
LoweredProgram lower_schedule(const Graph& graph, const KernelSchedule& schedule);
// Kernel IR of every step, kernel by kernel (kernel/kernel_text.h).
std::string print_lowered_program(const LoweredProgram& program);

// Emission: each step's source in the target's dialect; CUDA statements get #line directives to
// where their node was recorded.
void emit_program(LoweredProgram& program, const kernel::CodegenTarget& target);
// Emits one step's kernel with `options` and keeps what emission decided: the source, its lines'
// origins and the launch shape (emit_program's per-step work; a runtime-built kernel's too).
void emit_step(ProgramStep& step, const kernel::EmitOptions& options);
// Every step's generated source, with a header naming its kernel.
std::string print_sources(const LoweredProgram& program);

}  // namespace kiln
