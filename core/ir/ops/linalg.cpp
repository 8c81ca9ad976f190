// Shape and dtype rules of the linalg ops.
#include "core/ir/op.h"

namespace kiln::ops {

void define_linalg(std::vector<OpDef>& table) { (void)table; }

}  // namespace kiln::ops
