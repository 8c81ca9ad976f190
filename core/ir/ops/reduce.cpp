// Shape and dtype rules of the reduce ops.
#include "core/ir/op.h"

namespace kiln::ops {

void define_reduce(std::vector<OpDef>& table) { (void)table; }

}  // namespace kiln::ops
