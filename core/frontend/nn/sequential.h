// nn::Sequential: an owning, ordered chain of single-tensor modules named "0", "1", ... by default.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/frontend/nn/module.h"

namespace kiln::nn {

class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  std::string type_name() const override { return "Sequential"; }

  // Appends a child under `name`; returns it, borrowed.
  UnaryModule& add(const std::string& name, std::unique_ptr<UnaryModule> module);
  // Appends a child named by its position ("0", "1", ...), like PyTorch's Sequential(*layers).
  UnaryModule& add(std::unique_ptr<UnaryModule> module);
  // Builds an M in place: seq.emplace<Linear>(4, 8).
  template <class M, class... Args>
  M& emplace(Args&&... args) {
    auto module = std::make_unique<M>(std::forward<Args>(args)...);
    M& ref = *module;
    add(std::move(module));
    return ref;
  }

  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  size_t size() const { return layers_.size(); }
  UnaryModule& operator[](size_t index) const;

 private:
  std::vector<std::unique_ptr<UnaryModule>> layers_;
};

}  // namespace kiln::nn
