// kiln's public API: #include <kiln/kiln.h>.
#pragma once

#include "core/frontend/autograd.h"
#include "core/frontend/compile.h"
#include "core/frontend/control_flow.h"
#include "backends/device.h"
#include "core/frontend/factories.h"
#include "core/frontend/losses.h"
#include "core/frontend/optim.h"
#include "core/frontend/nn/nn.h"
#include "core/frontend/ops.h"
#include "core/frontend/tensor.h"
#include "core/ir/dtype.h"
#include "core/ir/symint.h"
#include "core/support/error.h"
