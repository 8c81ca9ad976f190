// The conformance suite's cases, shared by every device: single ops (run eagerly and compiled) and
// multi-op programs that must fuse or take a template when compiled. Inputs are built on the cpu.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::conformance {

struct OpCase {
  std::string name;
  std::function<std::vector<Tensor>()> inputs;  // built on cpu
  std::function<Tensor(const std::vector<Tensor>&)> run;
  double rtol = 1e-5, atol = 1e-5;
};

std::vector<OpCase> op_cases();

// A compiled program of several ops, with the shape its program must have on devices that
// generate code.
struct ProgramCase {
  OpCase program;
  std::optional<int64_t> kernels;  // launches per run, where fusion must reach exactly this many
  std::optional<OpKind> template_op;  // a device with a template for this op must run it
};

std::vector<ProgramCase> program_cases();

}  // namespace kiln::conformance
