// Donated inputs: a training step's program returns each updated parameter and optimizer state as
// an output that replaces an input's value. Where the caller gives up the input's buffer
// (DeviceTensor::donated) and no kernel reads the input after the output's kernel, the program
// writes the output over that buffer instead of a fresh one, as XLA's donated arguments do: the
// step then holds one copy of the parameters, not two.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

struct LoweredProgram;  // lowered_program.h

// Output `output` of a program may take the buffer of its input `input`.
struct OutputOverInput {
  size_t output = 0;
  size_t input = 0;
  bool operator==(const OutputOverInput&) const = default;
};

// The candidates (ProgramOptions::outputs_over_inputs) that are safe in `program`'s kernel order:
// the output is computed by a generated pointwise kernel (or one segment of a horizontal kernel)
// that reads the input only at the element it writes, and no later kernel and no output copy reads
// the input. Each input serves one output at most; the others are dropped.
std::vector<OutputOverInput> safe_outputs_over_inputs(const LoweredProgram& program,
                                                      const std::vector<OutputOverInput>& candidates);

// "output 3 over input 7 (%12 f32[512,784])" lines.
std::string print_outputs_over_inputs(const LoweredProgram& program, const std::vector<OutputOverInput>& pairs);

}  // namespace kiln
