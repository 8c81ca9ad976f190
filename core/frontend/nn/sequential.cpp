// nn::Sequential: ownership of the chain and running it in order.
#include "core/frontend/nn/sequential.h"

namespace kiln::nn {

UnaryModule& Sequential::add(const std::string& name, std::unique_ptr<UnaryModule> module) {
  if (!module) throw Error("Sequential::add('" + name + "') on " + describe() + ": null module");
  register_module(name, *module);  // first, so a bad name leaves the chain unchanged
  layers_.push_back(std::move(module));
  return *layers_.back();
}

UnaryModule& Sequential::add(std::unique_ptr<UnaryModule> module) {
  return add(std::to_string(layers_.size()), std::move(module));
}

UnaryModule& Sequential::operator[](size_t index) const {
  if (index >= layers_.size())
    throw Error(describe() + "[" + std::to_string(index) + "]: it holds " +
                std::to_string(layers_.size()) + " modules");
  return *layers_[index];
}

Tensor Sequential::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y, loc);
  return y;
}

}  // namespace kiln::nn
