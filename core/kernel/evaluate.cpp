// Host evaluation of kernel IR (to be written).
#include "core/kernel/evaluate.h"
