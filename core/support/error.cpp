// Formatting helpers for error messages.
#include "core/support/error.h"

namespace kiln {

std::string short_path(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string short_location(const Loc& loc) {
  return short_path(loc.file_name()) + ":" + std::to_string(loc.line());
}

}  // namespace kiln
