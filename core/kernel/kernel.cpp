// Kernel helpers: origins, special leaves and param evaluation.
#include "core/kernel/kernel.h"

#include <set>

#include "core/support/error.h"

namespace kiln::kernel {

std::vector<int> Kernel::origins() const {
  std::set<int> ids;
  auto add = [&](const ExprRef& e) {
    if (!e) return;
    for (int id : collect_origins(e)) ids.insert(id);
  };
  for (const Store& s : stores) add(s.value);
  for (const Segment& segment : segments)
    for (const Store& s : segment.stores) add(s.value);
  add(body);
  return {ids.begin(), ids.end()};
}

ExprRef reduction_index() {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::ReductionIndex;
  e->type = DType::I32;
  return e;
}

ExprRef accumulator(DType type) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Accumulator;
  e->type = type;
  return e;
}

std::vector<std::optional<int32_t>> LoweredKernel::static_param_values() const {
  std::vector<std::optional<int32_t>> out;
  for (const SymInt& p : params) out.push_back(p.is_static() ? std::optional<int32_t>(int32_t(p.value())) : std::nullopt);
  return out;
}

std::vector<int32_t> LoweredKernel::param_values(const std::map<std::string, int64_t>& bindings) const {
  std::vector<int32_t> out;
  out.reserve(params.size());
  for (const SymInt& p : params) {
    int64_t v = p.is_static() ? p.value() : p.evaluate(bindings);
    if (v > INT32_MAX || v < INT32_MIN)
      throw Error("kernel " + kernel.name + ": size/stride " + std::to_string(v) +
                  " exceeds 32-bit indexing");
    out.push_back(int32_t(v));
  }
  return out;
}

int64_t LoweredKernel::elements(const std::map<std::string, int64_t>& bindings) const {
  int64_t n = 1;
  for (int d = 0; d < kernel.rank; ++d) {
    const SymInt& p = params.at(size_t(d));
    n *= p.is_static() ? p.value() : p.evaluate(bindings);
  }
  return n;
}

}  // namespace kiln::kernel
