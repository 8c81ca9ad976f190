// Lowering of the shape ops to kernel IR (to be written).
#include "core/kernel/lower.h"
#include "core/support/error.h"

namespace kiln::kernel {

LoweredOp lower_shape(OpKind kind, const AttrMap&, const std::vector<TensorType>&,
                   const std::vector<TensorType>&, int) {
  throw Error("op '" + std::string(op_name(kind)) + "' has no kernel lowering yet");
}

}  // namespace kiln::kernel
