// The environment switches kiln reads for comparisons: KILN_<STAGE>=0 leaves a stage out.
#pragma once

#include <cstdlib>
#include <string_view>

namespace kiln {

// Whether environment variable `name` is "0".
inline bool switched_off(const char* name) {
  const char* value = std::getenv(name);
  return value && std::string_view(value) == "0";
}

}  // namespace kiln
