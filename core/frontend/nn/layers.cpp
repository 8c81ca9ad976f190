// kiln::nn layers (to be written).
#include "core/frontend/nn/layers.h"
