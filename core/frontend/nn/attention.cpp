// kiln::nn attention (to be written).
#include "core/frontend/nn/attention.h"
