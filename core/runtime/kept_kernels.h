// Kernels whose results a program keeps between runs: those that read only constants and parameter
// inputs the program never writes over (an imported model's weights, a frozen parameter), not data
// inputs or intermediates. A tensor's buffer never changes while it lives (kiln gives a tensor new values in
// a new buffer; a program writing over a donated input gives that buffer a new serial), so while
// the same buffers come back, such a kernel would compute what it computed last run: the executor
// skips it and reads its results where it left them (PlannedProgram). This is how a Winograd
// conv's weight transform, a transposed weight or batch norm's folded scale run once per set of
// weights, as oneDNN's reordered weights are kept on cpu. The memory plan keeps their results alive
// across the whole program, so nothing else is placed over them.
#pragma once

#include "core/runtime/lowered_program.h"
#include "core/runtime/program.h"

namespace kiln {

// Sets ProgramKernel::kept: a kernel reading at least one value, every one a constant or a
// parameter input (ProgramOptions::parameter_inputs) no output is written over
// (LoweredProgram::outputs_over_inputs), and writing intermediates only, in place of none of its
// inputs. None with reduce_overhead, which copies inputs into the program's own buffers.
void mark_kept_kernels(LoweredProgram& program, const ProgramOptions& options);

}  // namespace kiln
