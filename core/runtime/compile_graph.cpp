// compile_graph, as one list of stages; each logs at debug level and dumps its output.
#include "core/runtime/compile_graph.h"

#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/passes/passes.h"
#include "core/runtime/horizontal_fusion.h"
#include "core/runtime/kept_kernels.h"
#include "core/runtime/planned_program.h"
#include "core/runtime/schedule.h"
#include "core/runtime/segmented_program.h"
#include "core/runtime/standard_passes.h"
#include "core/support/env.h"
#include "core/support/error.h"
#include "core/support/log.h"

namespace kiln {

void StageDump::write(const std::string& stage, const std::string& extension, const std::string& text) {
  if (dir_.empty()) return;
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d-", next_++);
  std::filesystem::path file = std::filesystem::path(dir_) / (prefix + stage + "." + extension);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << "// kiln " << stage << "\n" << text;
  if (!out) throw Error("compile_graph: cannot write the " + stage + " dump " + file.string());
}

ProgramStages run_program_stages(const Graph& graph, Backend& backend, const ProgramOptions& options,
                                 StageDump dump) {
  std::optional<kernel::CodegenTarget> target = backend.codegen();
  if (!target)
    throw Error("compile_graph: backend '" + backend.name() + "' generates no code; its graphs run on the interpreter");

  const bool template_views = !switched_off("KILN_TEMPLATE_VIEWS");  // off: views before templates copied
  KernelSchedule schedule =
      schedule_kernels(graph, backend, options.fuse, options.max_autotune, template_views);  // fusion
  if (dump.enabled()) dump.write("fusion", "txt", print_schedule(schedule));

  LoweredProgram program = lower_schedule(graph, schedule);  // kernel IR per kernel
  if (dump.enabled()) dump.write("lower", "txt", print_lowered_program(program));

  HorizontalFusionOptions horizontal;
  horizontal.enabled = options.fuse && !switched_off("KILN_HORIZONTAL_FUSION");
  fuse_horizontal(program, *target, horizontal);  // independent small kernels as one launch
  if (dump.enabled()) dump.write("horizontal", "txt", print_horizontal(program));

  if (target->texel_reads)  // software Vulkan: static sizes as literals (kernel.h, Kernel::specialized)
    for (ProgramKernel& k : program.kernels)
      for (ProgramStep& s : k.steps) s.kernel.kernel.specialized = true;
  emit_program(program, *target);  // source in the backend's dialect
  if (dump.enabled()) dump.write("emit", program.language, print_sources(program));

  KernelPrograms compiled = compile_kernels(program, backend);  // backend compile

  if (!options.outputs_over_inputs.empty()) {  // donated inputs
    program.outputs_over_inputs = safe_outputs_over_inputs(program, options.outputs_over_inputs);
    if (dump.enabled()) dump.write("donation", "txt", print_outputs_over_inputs(program, program.outputs_over_inputs));
  }

  mark_kept_kernels(program, options);  // kernels of unchanging inputs run once per set of them

  ProgramMemory memory;  // memory planning, at the traced sizes (again per input shapes at run time)
  try {
    memory = plan_program_memory(program.values, program.kernels, traced_bindings(program.input_types),
                                 backend.caps().max_buffer_bytes);
    if (dump.enabled()) dump.write("memory-plan", "txt", print_program_memory(memory));
  } catch (const Error& e) {
    log::debug("compile_graph: no memory plan for the traced shapes yet: " + std::string(e.what()));
  }
  log::debug("compile_graph: " + std::to_string(program.kernels.size()) + " kernels for " + backend.name() +
             (memory.values.empty() ? "" : ", " + memory.plan.str()));
  return {*target, std::move(program), std::move(compiled), std::move(memory)};
}

namespace {

// Asks `backend` about a node at its traced sizes.
std::function<bool(const Node&)> ask(Backend& backend, bool (Backend::*question)(const OpRun&)) {
  return [&backend, question](const Node& n) {
    const ViewsAtHints views(n);
    return (backend.*question)(OpRun{n.kind, n.attrs, views.inputs, views.outputs});
  };
}

// The stages after the graph passes: the interpreter where the backend generates no code, a
// segmented program around loops (each segment and subgraph through the stages on its own), else
// the planned program.
std::unique_ptr<DeviceProgram> program_after_passes(const Graph& graph, Device device, const ProgramOptions& options,
                                                    StageDump dump, bool interpret = false) {
  Backend& backend = device.backend();
  if (interpret || !backend.codegen()) return make_interpreted_program(graph);
  if (has_control_flow(graph)) return make_segmented_program(graph, device, options, dump.dir());
  return std::make_unique<PlannedProgram>(run_program_stages(graph, backend, options, dump), device, options);
}

}  // namespace

CompiledGraph compile_graph(Graph& graph, Device device, const CompileGraphOptions& options) {
  CompiledGraph out;
  PipelineOptions pipeline = options.pipeline;
  pipeline.dump_dir = dump_directory(options.pipeline);
  const size_t num_inputs = graph.inputs().size();

  Backend& backend = device.backend();
  const bool generates_code = backend.codegen() && !options.interpret;
  // The backend's own passes first, so that the standard passes clean up what they wrote; winograd
  // before fold-constants, which folds constant weights' transforms, and before conv-as-matmul.
  std::vector<Pass> passes;
  if (generates_code) {
    passes.push_back(expand_ops_pass(ask(backend, &Backend::runs_unexpanded)));
    if (!switched_off("KILN_WINOGRAD")) passes.push_back(winograd_pass(ask(backend, &Backend::prefers_winograd)));
    if (!switched_off("KILN_CONV_AS_MATMUL"))
      passes.push_back(conv_as_matmul_pass(ask(backend, &Backend::prefers_conv_as_matmul)));
  }
  for (Pass& pass : standard_pipeline()) passes.push_back(std::move(pass));
  if (generates_code && !switched_off("KILN_CHANNELS_LAST"))
    passes.push_back(channels_last_pass(ask(backend, &Backend::prefers_channels_last)));  // layouts for the backend's kernels
  out.passes = run_pipeline(graph, passes, pipeline);  // graph passes, 00..NN
  if (graph.inputs().size() != num_inputs)
    throw Error("compile_graph: internal error: the pass pipeline changed the graph's inputs (" +
                std::to_string(num_inputs) + " -> " + std::to_string(graph.inputs().size()) + ")");

  const StageDump dump(pipeline.dump_dir, int(out.passes.size()) + 1);
  out.program = program_after_passes(graph, device, options.program, dump, options.interpret);
  return out;
}

std::unique_ptr<DeviceProgram> build_program(const Graph& graph, Device device, const ProgramOptions& options,
                                             const std::string& dump_dir) {
  return program_after_passes(graph, device, options, StageDump(dump_dir, 1));
}

}  // namespace kiln
