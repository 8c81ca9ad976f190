// Provenance construction and formatting.
#include "core/ir/provenance.h"

#include <algorithm>

#include "core/support/error.h"

namespace kiln {

namespace {
// "kiln::Tensor SmallCnn::forward(const kiln::Tensor&)" -> "SmallCnn::forward".
std::string short_function(const std::string& signature) {
  std::string name = signature.substr(0, signature.find('('));
  size_t space = name.find_last_of(' ');
  return space == std::string::npos ? name : name.substr(space + 1);
}
}  // namespace

std::string Origin::str() const {
  std::string s;
  if (!imported.empty()) s = "node '" + imported + "'";
  if (!file.empty()) {
    if (!s.empty()) s += " ";
    s += short_path(file) + ":" + std::to_string(line);
    if (!function.empty()) s += " (" + short_function(function) + ")";
  }
  if (!scope.empty()) s += " [" + scope + "]";
  if (s.empty()) s = "<unknown>";
  return gradient_of.empty() ? s : "gradient of " + gradient_of + " at " + s;
}

Provenance Provenance::gradient_of(std::string_view op) const {
  Provenance p = *this;
  for (Origin& o : p.origins) o.gradient_of = op;
  if (p.origins.empty()) p.origins.push_back(Origin{.gradient_of = std::string(op)});
  return p;
}

Provenance Provenance::from(const std::source_location& loc, const std::string& scope) {
  Origin o;
  o.file = loc.file_name();
  o.line = int(loc.line());
  o.function = loc.function_name();
  o.scope = scope;
  return Provenance{{o}};
}

void Provenance::merge(const Provenance& other) {
  for (const Origin& o : other.origins)
    if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
}

std::string Provenance::str() const {
  std::string s;
  for (size_t i = 0; i < origins.size(); ++i) {
    if (i) s += "; ";
    s += origins[i].str();
  }
  return s;
}

}  // namespace kiln
