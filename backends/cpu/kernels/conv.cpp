// Reference kernels for the conv ops.
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_conv(KernelTable& table) { (void)table; }

}  // namespace kiln::cpu
