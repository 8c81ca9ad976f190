// Attribute accessors with typed errors.
#include "core/ir/attr.h"

#include "core/ir/text.h"
#include "core/support/error.h"

namespace kiln {

int64_t Literal::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double Literal::element(int64_t i) const {
  return visit_dtype(dtype, [&]<class T>() {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return double(compute_t<T>(v));
  });
}

const char* attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::Int: return "int";
    case AttrType::Float: return "float";
    case AttrType::Bool: return "bool";
    case AttrType::String: return "string";
    case AttrType::Ints: return "ints";
    case AttrType::Floats: return "floats";
    case AttrType::Syms: return "syms";
    case AttrType::Type: return "dtype";
    case AttrType::Tensor: return "tensor";
    case AttrType::Graph: return "graph";
  }
  return "?";
}

AttrType attr_type(const Attr& attr) { return static_cast<AttrType>(attr.index()); }

bool attr_equal(const Attr& a, const Attr& b) {
  if (a.index() != b.index()) return false;
  if (auto* s = std::get_if<std::vector<SymInt>>(&a)) {
    const auto& t = std::get<std::vector<SymInt>>(b);
    if (s->size() != t.size()) return false;
    for (size_t i = 0; i < s->size(); ++i)
      if (!(*s)[i].same_as(t[i])) return false;
    return true;
  }
  if (auto* l = std::get_if<std::shared_ptr<const Literal>>(&a))
    return **l == *std::get<std::shared_ptr<const Literal>>(b);
  if (auto* g = std::get_if<std::shared_ptr<const Graph>>(&a)) {  // the same text is the same graph
    const auto& h = std::get<std::shared_ptr<const Graph>>(b);
    return *g == h || print_graph(**g) == print_graph(*h);
  }
  return a == b;
}

bool AttrMap::operator==(const AttrMap& other) const {
  if (map_.size() != other.map_.size()) return false;
  for (auto it = map_.begin(), jt = other.map_.begin(); it != map_.end(); ++it, ++jt)
    if (it->first != jt->first || !attr_equal(it->second, jt->second)) return false;
  return true;
}

const Attr& AttrMap::get(const std::string& name) const {
  auto it = map_.find(name);
  if (it == map_.end()) throw Error("attribute '" + name + "' is missing");
  return it->second;
}

namespace {
template <class T>
const T& typed(const AttrMap& m, const std::string& name, AttrType want) {
  const Attr& a = m.get(name);
  if (auto* v = std::get_if<T>(&a)) return *v;
  throw Error("attribute '" + name + "' is " + attr_type_name(attr_type(a)) + ", expected " +
              attr_type_name(want));
}
}  // namespace

int64_t AttrMap::get_int(const std::string& n) const { return typed<int64_t>(*this, n, AttrType::Int); }
double AttrMap::get_float(const std::string& n) const {
  if (auto* i = std::get_if<int64_t>(&get(n))) return double(*i);
  return typed<double>(*this, n, AttrType::Float);
}
bool AttrMap::get_bool(const std::string& n) const { return typed<bool>(*this, n, AttrType::Bool); }
const std::string& AttrMap::get_string(const std::string& n) const {
  return typed<std::string>(*this, n, AttrType::String);
}
const std::vector<int64_t>& AttrMap::get_ints(const std::string& n) const {
  return typed<std::vector<int64_t>>(*this, n, AttrType::Ints);
}
const std::vector<double>& AttrMap::get_floats(const std::string& n) const {
  return typed<std::vector<double>>(*this, n, AttrType::Floats);
}
const std::vector<SymInt>& AttrMap::get_syms(const std::string& n) const {
  return typed<std::vector<SymInt>>(*this, n, AttrType::Syms);
}
DType AttrMap::get_dtype(const std::string& n) const { return typed<DType>(*this, n, AttrType::Type); }
const Literal& AttrMap::get_tensor(const std::string& n) const {
  return *typed<std::shared_ptr<const Literal>>(*this, n, AttrType::Tensor);
}
const Graph& AttrMap::get_graph(const std::string& n) const {
  return *typed<std::shared_ptr<const Graph>>(*this, n, AttrType::Graph);
}

}  // namespace kiln
