// Graph verifier (see verifier.h).
#include "core/ir/verifier.h"
