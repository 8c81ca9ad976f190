// nn::Module: the base of PyTorch-style modules: named parameters and buffers, submodules, dotted
// paths ("features.3.conv") pushed as the op provenance scope, and state_dict load/save.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/frontend/scope.h"
#include "core/frontend/tensor.h"

namespace kiln::nn {

// What a non-strict load_state_dict skipped, like PyTorch's _IncompatibleKeys.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

// A module owns its parameters and buffers; submodules are owned by whoever declares them (a
// member, or Sequential's list) and only borrowed here. Children keep a pointer to their parent,
// so modules are neither copyable nor movable.
class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // "Linear", "Conv2d": the scope an unnamed root module runs under.
  virtual std::string type_name() const { return "Module"; }

  const std::string& name() const { return name_; }
  // Names a root module; its path then starts with this name.
  void set_name(std::string name);
  const Module* parent() const { return parent_; }
  // Local names joined from the root: "features.3.conv"; empty for an unnamed root.
  std::string path() const;

  // Ordered (dotted name, tensor) lists, recursive: own entries first, then each child's.
  std::vector<std::pair<std::string, Tensor*>> named_parameters();
  // The parameters alone, in the same order: what an optimizer takes. Floating-point parameters
  // require grad from registration on, as in libtorch; NoGradGuard keeps inference from recording,
  // and `p->requires_grad_(false)` freezes one.
  std::vector<Tensor*> parameters();
  std::vector<std::pair<std::string, Tensor*>> named_buffers();
  // Parameters and buffers together, in PyTorch's state_dict order.
  std::vector<std::pair<std::string, Tensor*>> named_tensors();
  const std::vector<std::pair<std::string, Module*>>& children() const { return children_; }

  std::map<std::string, Tensor> state_dict();
  // Replaces parameter and buffer values by key, converted to each one's dtype and device. Shapes
  // must match. With strict, missing and unexpected keys are errors too; every problem is reported
  // in one kiln::Error and nothing is changed when it throws.
  LoadResult load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  // Moves every parameter and buffer, recursively; parameters keep requiring grad.
  Module& to(Device device);

  // Training mode (the default, as in torch) or evaluation mode, for this module and every
  // submodule: BatchNorm2d normalizes with batch statistics and Dropout drops only in training.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

 protected:
  // The returned reference stays valid for the module's lifetime.
  Tensor& register_parameter(const std::string& name, Tensor value);
  Tensor& register_buffer(const std::string& name, Tensor value);
  // `child` must outlive its use through this module (a member, or owned alongside it).
  void register_module(const std::string& name, Module& child);

  // Pushes this module's path (or type name at an unnamed root) as the current op scope.
  ScopeGuard scope() const { return ScopeGuard(scope_name()); }
  std::string scope_name() const;
  // "Linear 'fc'" for error messages.
  std::string describe() const;

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
    bool is_buffer;
  };
  enum class Select { Parameters, Buffers, All };
  void collect(const std::string& prefix, Select select,
               std::vector<std::pair<std::string, Tensor*>>& out);
  Tensor& add_entry(const std::string& name, Tensor value, bool is_buffer);
  void check_new_name(const std::string& name, std::string_view what) const;

  std::string name_;
  Module* parent_ = nullptr;
  bool training_ = true;
  std::deque<Entry> entries_;  // deque: references handed out stay valid as it grows
  std::vector<std::pair<std::string, Module*>> children_;
};

// A module whose forward maps one tensor to one: what Sequential can chain.
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x, Loc loc = Loc::current()) = 0;
  Tensor operator()(const Tensor& x, Loc loc = Loc::current()) { return forward(x, loc); }
};

}  // namespace kiln::nn
