// Checked mode: after each eager op (and so each interpreted graph node) kiln looks for NaN/Inf in
// float outputs and out-of-range gather/index_select/embedding indices, and raises at the first.
#pragma once

#include <functional>
#include <vector>

#include "core/ir/attr.h"
#include "core/ir/op.h"
#include "core/ir/provenance.h"
#include "core/runtime/device_tensor.h"

namespace kiln {

// On when set_checked_mode(true) was called on this process, or KILN_CHECK=1 (read once, at the
// first call; set_checked_mode overrides it).
bool checked_mode();
void set_checked_mode(bool on);

// Turns checked mode on for one scope and restores the previous setting after.
class CheckedModeScope {
 public:
  explicit CheckedModeScope(bool on = true);
  ~CheckedModeScope();
  CheckedModeScope(const CheckedModeScope&) = delete;
  CheckedModeScope& operator=(const CheckedModeScope&) = delete;

 private:
  bool previous_;
};

// execute_op's hook: checks `inputs`' indices before `run` (so the reference's own bounds error
// and the GPU's silent clamp both give way to one message), runs it, then scans its outputs.
// Throws kiln::Error: "checked mode: op 'log' at demo.cpp:12 (f) [scope] produced NaN ...".
std::vector<DeviceTensor> run_checked(OpKind kind, const std::vector<DeviceTensor>& inputs,
                                      const AttrMap& attrs, const Provenance& where,
                                      const std::function<std::vector<DeviceTensor>()>& run);

}  // namespace kiln
