// Op functions of the reduce family (declared in ops.h).
#include "core/frontend/dispatch.h"
#include "core/frontend/ops.h"

namespace kiln {}  // namespace kiln
