// compile_graph: the compiler from a graph to a program for one device, as one list of named
// stages (compile_graph.cpp reads top to bottom):
//   graph passes (core/passes/pipeline.cpp) -> fusion (the kernel schedule) -> lowering (kernel
//   IR) -> emission (source in the backend's dialect) -> backend compile -> donated inputs (a
//   training step's updates written over its inputs) -> memory planning.
// KILN_DUMP_IR=dir (or PipelineOptions::dump_dir) writes every stage's output as text: 00-input.kir
// and NN-<pass>.kir for the graph passes, then NN-fusion.txt, NN-lower.txt, NN-horizontal.txt,
// NN-emit.<language>, NN-donation.txt (training steps) and NN-memory-plan.txt. compile(fn), lazy segments and ONNX models all compile through here.
// A graph with control flow (while_loop) becomes a segmented program (segmented_program.h): the
// stages after the graph passes run per segment between loops, and each loop's subgraphs compile
// through here on their own (dumped in N-segment/ and N-while_loop/{cond,body}/).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/passes/pass.h"
#include "core/runtime/kernel_programs.h"
#include "core/runtime/lowered_program.h"
#include "core/runtime/program.h"
#include "core/runtime/program_memory.h"

namespace kiln {

struct CompileGraphOptions {
  PipelineOptions pipeline;  // dump directory, keep each pass's IR (bundles)
  ProgramOptions program;    // fusion on/off, reduce_overhead
  // The graph passes, then the node-by-node interpreter, as for a backend that generates no code:
  // eager work on a backend whose eager ops run precompiled kernels (Backend::eager_compiles_kernels).
  bool interpret = false;
};

struct CompiledGraph {
  std::vector<PassRecord> passes;  // one per graph pass
  std::unique_ptr<DeviceProgram> program;
};

// Runs every stage on `graph` (which the graph passes rewrite in place) for `device`. A backend
// that generates no code (Backend::codegen() empty), or options.interpret, gets the node-by-node
// interpreter after the graph passes.
CompiledGraph compile_graph(Graph& graph, Device device, const CompileGraphOptions& options = {});

// Numbered text files of stage outputs in one directory; empty directory: writes nothing.
class StageDump {
 public:
  StageDump() = default;
  StageDump(std::string dir, int first_number) : dir_(std::move(dir)), next_(first_number) {}
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  // Writes NN-<stage>.<extension>, NN counting up from first_number. Callers test enabled()
  // first, so a compile without a dump directory never prints a stage.
  void write(const std::string& stage, const std::string& extension, const std::string& text);

 private:
  std::string dir_;
  int next_ = 0;
};

// What the stages after the graph passes produce for a code-generating backend: PlannedProgram's
// constructor input.
struct ProgramStages {
  kernel::CodegenTarget target;
  LoweredProgram program;
  KernelPrograms compiled;
  ProgramMemory memory;  // for the traced sizes; empty when they could not be planned
};

// Fusion, lowering, emission, backend compile, donated inputs and memory planning, each dumped to
// `dump`.
ProgramStages run_program_stages(const Graph& graph, Backend& backend, const ProgramOptions& options,
                                 StageDump dump = {});

}  // namespace kiln
