// Checked mode: host-side scans of each eager op's outputs (NaN/Inf) and index inputs (range).
#include "core/runtime/checked.h"
#include "core/support/error.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace kiln {
namespace {

// -1: not decided yet (KILN_CHECK is read on first use), else 0/1.
std::atomic<int> g_checked{-1};

std::string origin_text(const Provenance& where) {
  // The first origin is the line that made the value; merged nodes list the others after it.
  if (where.empty()) return "an unknown origin (the node carries no provenance)";
  std::string s = where.origins[0].str();  // file:line (function) [scope]
  if (where.origins.size() > 1) s += " (also merged from: " + where.str() + ")";
  return s;
}

[[noreturn]] void fail(OpKind kind, const std::vector<DeviceTensor>& inputs, const Provenance& where,
                       const std::string& what) {
  throw Error("checked mode: " + op_error(kind, types_of(inputs), where, what) +
              "\n  first produced by: " + origin_text(where) +
              "\n  (turn checked mode off with KILN_CHECK=0 or kiln::set_checked_mode(false))");
}

// The flat position of the first non-finite element, or -1.
int64_t first_non_finite(const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return int64_t(i);
  return -1;
}

std::string value_text(double v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "+Inf" : "-Inf";
}

// Indexing ops: the index input and the dim it selects along.
void check_indices(OpKind kind, const std::vector<DeviceTensor>& inputs, const AttrMap& attrs,
                   const Provenance& where) {
  if (kind != OpKind::Gather && kind != OpKind::IndexSelect) return;
  if (inputs.size() < 2 || inputs[0].type.rank() == 0) return;
  AttrMap full = complete_attrs(kind, attrs, where);
  int64_t rank = int64_t(inputs[0].type.rank());
  int64_t dim = full.get_int("dim");
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) return;  // the shape rule has already rejected this
  const int64_t size = inputs[0].sizes()[size_t(dim)];
  std::vector<int64_t> idx = inputs[1].to_host<int64_t>();
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= -size && idx[i] < size) continue;
    std::ostringstream why;
    why << "index " << idx[i] << " at position " << i << " of the index tensor "
        << inputs[1].type.str() << " is out of range for dim " << dim << " of size " << size
        << " (valid: " << -size << " to " << size - 1 << ")";
    fail(kind, inputs, where, why.str());
  }
}

// NaN always raises. ±Inf raises only when this op made it (overflow, x/0, log(0)): an Inf that
// came in through an input, such as attention's -inf mask, is passed on on purpose.
void check_outputs(OpKind kind, const std::vector<DeviceTensor>& inputs,
                   const std::vector<DeviceTensor>& outputs,
                   const Provenance& where) {
  int input_non_finite = -2;  // -2: not scanned yet; -1: none; else the first such input
  auto non_finite_input = [&] {
    if (input_non_finite == -2) {
      input_non_finite = -1;
      for (size_t i = 0; i < inputs.size() && input_non_finite < 0; ++i)
        if (inputs[i].defined() && is_floating(inputs[i].type.dtype) && inputs[i].numel() > 0 &&
            first_non_finite(inputs[i].to_host<double>()) >= 0)
          input_non_finite = int(i);
    }
    return input_non_finite;
  };
  for (size_t o = 0; o < outputs.size(); ++o) {
    const DeviceTensor& t = outputs[o];
    if (!t.defined() || !is_floating(t.type.dtype) || t.numel() == 0) continue;
    std::vector<double> v = t.to_host<double>();
    int64_t at = -1;
    for (size_t i = 0; i < v.size() && at < 0; ++i)
      if (std::isnan(v[i]) || (std::isinf(v[i]) && non_finite_input() < 0)) at = int64_t(i);
    if (at < 0) continue;
    std::ostringstream why;
    why << "produced " << value_text(v[size_t(at)]) << " at element " << at << " of output " << o
        << " " << t.type.str();
    // An op fed NaN only passes it on; say so, so the reader looks further up.
    if (non_finite_input() >= 0)
      why << "; its input " << non_finite_input() << " already held non-finite values (they came"
          << " from the data fed in, not from this op)";
    fail(kind, inputs, where, why.str());
  }
}

}  // namespace

bool checked_mode() {
  int v = g_checked.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("KILN_CHECK");
    v = env && *env && std::string(env) != "0" ? 1 : 0;
    int expected = -1;
    g_checked.compare_exchange_strong(expected, v);
    v = g_checked.load();
  }
  return v == 1;
}

void set_checked_mode(bool on) { g_checked.store(on ? 1 : 0); }

CheckedModeScope::CheckedModeScope(bool on) : previous_(checked_mode()) { set_checked_mode(on); }
CheckedModeScope::~CheckedModeScope() { set_checked_mode(previous_); }

std::vector<DeviceTensor> run_checked(OpKind kind, const std::vector<DeviceTensor>& inputs,
                                      const AttrMap& attrs, const Provenance& where,
                                      const std::function<std::vector<DeviceTensor>()>& run) {
  check_indices(kind, inputs, attrs, where);
  std::vector<DeviceTensor> outputs = run();
  check_outputs(kind, inputs, outputs, where);
  return outputs;
}

}  // namespace kiln
