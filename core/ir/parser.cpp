// Parses the text form (see text.h).
#include "core/ir/text.h"
