// Reference kernels for the linalg ops.
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_linalg(KernelTable& table) { (void)table; }

}  // namespace kiln::cpu
