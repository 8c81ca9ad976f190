// Where a node came from: the user's C++ line and module scope, or an imported model's node name.
// A node made from others (fusion, folding) carries the union of their origins.
#pragma once

#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct Origin {
  std::string file;      // full path as the compiler saw it
  int line = 0;
  std::string function;
  std::string scope;     // module path, "features.3.conv"; empty at top level
  std::string imported;  // an imported model's node name ("/layer1/conv"), else empty
  // Set on gradient nodes: the op whose derivative they compute, recorded at this origin ("conv").
  std::string gradient_of;

  bool operator==(const Origin&) const = default;
  std::string str() const;  // "demo.cpp:12 (block) [features.3.conv]", "gradient of conv at ..."
};

struct Provenance {
  std::vector<Origin> origins;

  static Provenance from(const std::source_location& loc, const std::string& scope);
  bool empty() const { return origins.empty(); }
  void merge(const Provenance& other);  // union, order kept, no duplicates
  std::string str() const;              // origins joined by "; "
  // The same origins marked as computing the gradient of `op`.
  Provenance gradient_of(std::string_view op) const;
};

}  // namespace kiln
