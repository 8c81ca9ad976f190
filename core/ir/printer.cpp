// Text form of a graph (see text.h).
#include "core/ir/text.h"
