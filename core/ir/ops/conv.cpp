// Shape and dtype rules of the conv ops.
#include "core/ir/op.h"

namespace kiln::ops {

void define_conv(std::vector<OpDef>& table) { (void)table; }

}  // namespace kiln::ops
