// Node attributes: a small closed set of value types, kept in a name-ordered map.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/ir/dtype.h"
#include "core/ir/shape.h"

namespace kiln {

// A constant tensor stored in the graph (the `constant` op's value): row-major bytes.
struct Literal {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const;
  double element(int64_t i) const;  // as double, for printing and folding
  bool operator==(const Literal&) const = default;
};

class Graph;  // core/ir/graph.h: a control-flow op's subgraph (a loop's condition and body)

enum class AttrType { Int, Float, Bool, String, Ints, Floats, Syms, Type, Tensor, Graph };
const char* attr_type_name(AttrType type);

using Attr = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                          std::vector<double>, std::vector<SymInt>, DType,
                          std::shared_ptr<const Literal>, std::shared_ptr<const Graph>>;

AttrType attr_type(const Attr& attr);
bool attr_equal(const Attr& a, const Attr& b);

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, Attr>> init) : map_(init) {}

  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void set(const std::string& name, Attr value) { map_[name] = std::move(value); }
  const Attr& get(const std::string& name) const;  // throws kiln::Error when absent

  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;  // accepts an Int too
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  const std::vector<double>& get_floats(const std::string& name) const;
  const std::vector<SymInt>& get_syms(const std::string& name) const;
  DType get_dtype(const std::string& name) const;
  const Literal& get_tensor(const std::string& name) const;
  const Graph& get_graph(const std::string& name) const;

  auto begin() const { return map_.begin(); }
  auto end() const { return map_.end(); }
  size_t size() const { return map_.size(); }
  bool operator==(const AttrMap& other) const;

 private:
  std::map<std::string, Attr> map_;
};

}  // namespace kiln
