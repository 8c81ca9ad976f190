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
  bool has_gradient = true;  // false for channels-last ops: autodiff runs before that layout is chosen
};

std::vector<OpCase> op_cases();

// A compiled program of several ops, with the shape its program must have on devices that
// generate code: at most `kernels` kernels (fused groups; a kernel may take several launches);
// where the device has a template for template_op, that template runs (it takes no epilogue, so
// one more kernel may follow it).
struct ProgramCase {
  OpCase program;
  int64_t kernels = 1;
  std::optional<OpKind> template_op;
  int64_t kernels_with_template = 1;
  // The same program's inputs with other sizes (a batch or spatial dim changed): a recompile
  // that must match the reference too.
  std::function<std::vector<Tensor>()> resized_inputs;
};

std::vector<ProgramCase> program_cases();

}  // namespace kiln::conformance
