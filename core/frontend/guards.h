// The guards of one compiled entry: everything a call must match for the entry's program to give
// fn's result (argument kinds, tensor dtypes/devices/ranks/sizes, scalar values, module parameter
// types, captured tensors still owned, and every shape decision fn made on a symbolic dim).
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/frontend/compile.h"

namespace kiln::compile_detail {

// A module argument's parameters and buffers for this call, in named_tensors() order.
using ModuleTensors = std::vector<std::pair<std::string, Tensor*>>;

struct TensorGuard {
  bool defined = false;
  DType dtype = DType::F32;
  Device device;
  Shape dims;  // a static size, or a bare symbol (s0) bound from this dim at each call
};

struct ScalarGuard {
  DType kind = DType::I64;
  int64_t int_value = 0;
  double float_value = 0;
};

// Where a captured tensor comes from at replay.
struct CaptureSource {
  bool from_module = false;
  size_t arg = 0;    // module argument index
  size_t index = 0;  // position in that module's named_tensors()
  std::string name;  // "fc.weight", or "captured3" for a tensor reached some other way
  TensorType type;
  Device device;
  Tensor fixed;          // !from_module: the handle the trace captured
  bool owned_elsewhere = false;  // !from_module: someone besides the trace held it when compiled
  // Training steps: the gradient of capture `grad_of`, read from it at each call (what a backward
  // without zero_grad adds to); -1 for any other tensor.
  int grad_of = -1;
  // Training steps: whether this parameter's gradient was defined when compiled, for a backward
  // that adds to it (1, 0); -1 when the trace does not depend on it.
  int grad_defined = -1;
};

// A shape decision (`x.shape(0) > 10`) and the module scope it was made in.
struct DecisionGuard {
  ShapeGuard guard;
  std::string scope;
};

// A module argument's training mode and its submodules', depth first ("1" training, "0" eval):
// train() and eval() change what batch norm and dropout trace to.
std::string training_modes(const nn::Module& module);

struct EntryGuards {
  std::vector<ArgKind> kinds;
  std::vector<TensorGuard> tensors;   // by argument index (meaningful for tensor arguments)
  std::vector<ScalarGuard> scalars;   // by argument index (meaningful for scalars)
  std::vector<size_t> module_sizes;   // by argument index: named_tensors() count of modules
  std::vector<std::string> module_modes;  // by argument index: training_modes() of modules
  std::vector<CaptureSource> captures;  // graph inputs after the real ones, in order
  std::vector<DecisionGuard> decisions;

  // Why this call cannot use the entry, or nullopt when every guard holds.
  std::optional<std::string> check(std::span<const ArgView> args,
                                   const std::vector<ModuleTensors>& modules) const;
  // The program's inputs for this call: tensor arguments, then captured tensors (re-read from
  // the module arguments so replaced weights are used).
  std::vector<Tensor> program_inputs(std::span<const ArgView> args,
                                     const std::vector<ModuleTensors>& modules) const;
  // Capture k's tensor for this call.
  Tensor capture_tensor(size_t k, const std::vector<ModuleTensors>& modules) const;
};

// "s0 > 10 at model.cpp:12 [encoder.0]"
std::string describe_decision(const DecisionGuard& decision);
std::string scalar_text(DType kind, int64_t int_value, double float_value);
std::string describe_tensor(const TensorGuard& guard);  // "f32[s0,4] on cpu"

}  // namespace kiln::compile_detail
