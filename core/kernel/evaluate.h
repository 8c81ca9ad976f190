// Evaluates lowered kernels on the host, element by element, exactly as the GLSL printer's code
// would run them; a test oracle that checks lowerings against the cpu reference without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ir/host_tensor.h"
#include "core/kernel/lower.h"

namespace kiln::kernel {

// Runs every step of `op` in order: allocates its temps, binds each kernel's buffer slots and
// computes each element with the printer's compute types, conversions and reduction rules.
// Throws kiln::Error naming the kernel and buffer for an out-of-bounds load or store, a read of a
// temp/output element no earlier kernel wrote, a slot whose dtype differs from the bound tensor,
// and (after the last step) an output element no kernel wrote: each is a lowering bug.
void evaluate(const LoweredOp& op, const std::vector<HostTensor>& inputs,
              const std::vector<HostTensor>& outputs,
              const std::map<std::string, int64_t>& bindings = {});

// One kernel on explicit buffers (slot i binds buffers[i]); no write-coverage checks.
void evaluate_kernel(const LoweredKernel& kernel, const std::vector<HostTensor>& buffers,
                     const std::map<std::string, int64_t>& bindings = {});

}  // namespace kiln::kernel
