// Reference kernels for the data-movement ops.
#include <cstring>

#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {
namespace {

void constant_kernel(const KernelContext& ctx) {
  const Literal& lit = ctx.attrs.get_tensor("value");
  std::memcpy(ctx.outputs[0].data, lit.bytes.data(), lit.bytes.size());
}

}  // namespace

void register_shape(KernelTable& t) { t.set(OpKind::Constant, constant_kernel); }

}  // namespace kiln::cpu
