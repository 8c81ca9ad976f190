// kiln::nn sequential (to be written).
#include "core/frontend/nn/sequential.h"
