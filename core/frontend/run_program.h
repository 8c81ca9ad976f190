// Running a runtime program (core/runtime/program.h) on Tensors: their data goes in, and the
// results come back as tensors without autograd history.
#pragma once

#include <vector>

#include "core/frontend/tensor.h"
#include "core/runtime/program.h"

namespace kiln {

inline std::vector<Tensor> run_program(DeviceProgram& program, const std::vector<Tensor>& inputs) {
  return tensors_of(program.run(device_tensors(inputs)));
}

}  // namespace kiln
