// The optimizers' updates, as eager kiln ops under NoGradGuard, following torch's documented
// algorithms (torch.optim.SGD, Adam, AdamW).
#include "core/frontend/optim.h"

#include <cmath>

#include "core/frontend/autograd.h"
#include "core/frontend/factories.h"
#include "core/frontend/ops.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor*> params, double lr)
    : params_(std::move(params)), lr_(lr), state_(params_.size()) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i] || !params_[i]->defined())
      throw Error("optimizer: parameter " + std::to_string(i) + " is undefined");
}

void Optimizer::zero_grad() {
  for (Tensor* p : params_) p->impl().grad = nullptr;
}

void Optimizer::assign(Tensor& param, const Tensor& value) {
  TensorImpl& impl = param.impl();
  if (value.type().str() != impl.type.str() || value.device() != impl.device)
    throw Error("optimizer: the update of a " + impl.type.str() + " parameter on " + impl.device.name() +
                " is " + value.type().str() + " on " + value.device().name());
  impl.buffer = value.impl().buffer;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  out["lr"] = from_vector(std::vector<double>{lr_}, Dims(std::vector<int64_t>{}));
  out["step"] = from_vector(std::vector<int64_t>{steps_}, Dims(std::vector<int64_t>{}));
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [name, t] : state_[i]) out[std::to_string(i) + "." + name] = t;
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  std::vector<std::map<std::string, Tensor>> loaded(params_.size());
  for (const auto& [key, t] : state) {
    if (key == "lr" || key == "step") continue;
    size_t dot = key.find('.');
    size_t index = dot == std::string::npos ? params_.size() : size_t(std::stoul(key.substr(0, dot)));
    if (index >= params_.size())
      throw Error("optimizer: load_state_dict: key '" + key + "' names no parameter of " +
                  std::to_string(params_.size()));
    const Tensor& p = *params_[index];
    if (t.type().str() != p.type().str())
      throw Error("optimizer: load_state_dict: '" + key + "' is " + t.type().str() + ", parameter " +
                  std::to_string(index) + " is " + p.type().str());
    loaded[index][key.substr(dot + 1)] = t.to(p.device());
  }
  auto lr = state.find("lr"), step = state.find("step");
  if (lr == state.end() || step == state.end())
    throw Error("optimizer: load_state_dict: the state has no 'lr' or 'step' entry");
  lr_ = lr->second.item<double>();
  steps_ = step->second.item<int64_t>();
  state_ = std::move(loaded);
}

SGD::SGD(std::vector<Tensor*> params, SGDOptions options) : Optimizer(std::move(params), options.lr), options_(options) {
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw Error("optim::SGD: nesterov needs a momentum and zero dampening");
}

void SGD::step() {
  NoGradGuard no_grad;
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = *params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (options_.weight_decay != 0) g = g + p * options_.weight_decay;
    if (options_.momentum != 0) {
      auto it = state_[i].find("momentum_buffer");
      Tensor buf = it == state_[i].end() ? g : it->second * options_.momentum + g * (1 - options_.dampening);
      state_[i]["momentum_buffer"] = buf;
      g = options_.nesterov ? g + buf * options_.momentum : buf;
    }
    assign(p, p - g * lr_);
  }
}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {}

void Adam::step() {
  NoGradGuard no_grad;
  ++steps_;
  const double t = double(steps_);
  const double correction1 = 1 - std::pow(options_.beta1, t), correction2 = 1 - std::pow(options_.beta2, t);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = *params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor param = p;
    if (options_.weight_decay != 0) {
      if (decoupled_) param = param * (1 - lr_ * options_.weight_decay);
      else g = g + param * options_.weight_decay;
    }
    auto& s = state_[i];
    Tensor m = s.count("exp_avg") ? s["exp_avg"] * options_.beta1 + g * (1 - options_.beta1) : g * (1 - options_.beta1);
    Tensor v = s.count("exp_avg_sq") ? s["exp_avg_sq"] * options_.beta2 + g * g * (1 - options_.beta2)
                                     : g * g * (1 - options_.beta2);
    s["exp_avg"] = m;
    s["exp_avg_sq"] = v;
    Tensor denom = sqrt(v / correction2) + options_.eps;
    assign(p, param - (m / correction1) / denom * lr_);
  }
}

AdamW::AdamW(std::vector<Tensor*> params, AdamWOptions o)
    : Adam(std::move(params), AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}, true) {}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : optimizer_(optimizer), step_size_(step_size), gamma_(gamma), initial_(optimizer.lr()) {
  if (step_size < 1) throw Error("optim::StepLR: step_size must be >= 1, got " + std::to_string(step_size));
}

void StepLR::step() {
  ++epoch_;
  optimizer_.set_lr(initial_ * std::pow(gamma_, double(epoch_ / step_size_)));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : optimizer_(optimizer), t_max_(t_max), eta_min_(eta_min), initial_(optimizer.lr()) {
  if (t_max < 1) throw Error("optim::CosineAnnealingLR: t_max must be >= 1, got " + std::to_string(t_max));
}

void CosineAnnealingLR::step() {
  ++epoch_;
  optimizer_.set_lr(eta_min_ + (initial_ - eta_min_) * (1 + std::cos(M_PI * double(epoch_) / double(t_max_))) / 2);
}

}  // namespace kiln::optim
