// kiln::nn module (to be written).
#include "core/frontend/nn/module.h"
