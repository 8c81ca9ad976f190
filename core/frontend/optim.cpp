// The optimizers' updates, as eager kiln ops under NoGradGuard, following torch's documented
// algorithms (torch.optim.SGD, Adam, AdamW).
#include "core/frontend/optim.h"

#include <cmath>

#include "core/frontend/autograd.h"
#include "core/frontend/factories.h"
#include "core/frontend/in_place.h"
#include "core/frontend/ops.h"
#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"

namespace kiln::optim {

Optimizer::Optimizer(std::vector<Tensor*> params, double lr)
    : params_(std::move(params)), lr_(lr), state_(params_.size()) {
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i] || !params_[i]->defined())
      throw Error("optimizer: parameter " + std::to_string(i) + " is undefined");
}

void Optimizer::zero_grad() {
  for (Tensor* p : params_) {
    if (Tracer* tracer = compiling_tracer()) tracer->write_grad(*p, Tensor());
    p->impl().grad = nullptr;
  }
}

void Optimizer::set_lr(double lr) {
  lr_ = lr;
  for (auto& [key, t] : lr_tensors_) assign_in_place(t, full({}, lr, t.dtype(), t.device()));
}

Tensor& Optimizer::state(size_t i, const std::string& name, const Dims& shape) {
  auto it = state_[i].find(name);
  if (it == state_[i].end()) {
    const Tensor& p = *params_[i];
    it = state_[i].emplace(name, zeros(shape, p.dtype(), p.device())).first;
  }
  return it->second;
}

Tensor& Optimizer::advance_step(size_t i) {
  Tensor& count = state(i, "step", Dims(std::vector<int64_t>{}));
  assign_in_place(count, count + 1.0);
  return count;
}

const Tensor& Optimizer::lr_for(const Tensor& param) {
  const std::string key = std::string(dtype_name(param.dtype())) + "@" + param.device().name();
  auto it = lr_tensors_.find(key);
  if (it == lr_tensors_.end()) it = lr_tensors_.emplace(key, full({}, lr_, param.dtype(), param.device())).first;
  return it->second;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  out["lr"] = from_vector(std::vector<double>{lr_}, Dims(std::vector<int64_t>{}));
  const auto first = state_.empty() ? state_.end() : state_.begin();
  const auto count = first == state_.end() ? nullptr : &*first;
  int64_t steps = 0;
  if (count && count->count("step")) steps = int64_t(count->at("step").item<double>());
  out["step"] = from_vector(std::vector<int64_t>{steps}, Dims(std::vector<int64_t>{}));
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
    const std::string name = key.substr(dot + 1);
    const TensorType want = name == "step" ? TensorType{p.dtype(), {}} : p.type();  // a count per parameter
    if (t.type().str() != want.str())
      throw Error("optimizer: load_state_dict: '" + key + "' is " + t.type().str() + ", expected " + want.str() +
                  " for parameter " + std::to_string(index) + " " + p.type().str());
    loaded[index][name] = t.to(p.device()).detach();  // its own handle: steps update it in place
  }
  auto lr = state.find("lr"), step = state.find("step");
  if (lr == state.end() || step == state.end())
    throw Error("optimizer: load_state_dict: the state has no 'lr' or 'step' entry");
  state_ = std::move(loaded);
  set_lr(lr->second.item<double>());
}

SGD::SGD(std::vector<Tensor*> params, SGDOptions options) : Optimizer(std::move(params), options.lr), options_(options) {
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
    throw Error("optim::SGD: nesterov needs a momentum and zero dampening");
}

void SGD::step() {
  NoGradGuard no_grad;
  ScopeGuard scope("optim.SGD");  // the update's ops, in dumps and bundles (phase "optimizer")
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = *params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const Tensor& count = advance_step(i);
    if (options_.weight_decay != 0) g = g + p * options_.weight_decay;
    if (options_.momentum != 0) {
      Tensor& buf = state(i, "momentum_buffer", Dims(p.sizes()));
      Tensor next = buf * options_.momentum + g * (1 - options_.dampening);
      if (options_.dampening != 0) next = where(eq(count, full({}, 1.0, count.dtype(), count.device())), g, next);
      assign_in_place(buf, next);  // torch's first step: the buffer is the gradient
      g = options_.nesterov ? g + next * options_.momentum : next;
    }
    assign_in_place(p, p - g * lr_for(p));
  }
}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(params), options.lr), options_(options), decoupled_(decoupled) {}

void Adam::step() {
  NoGradGuard no_grad;
  ScopeGuard scope(decoupled_ ? "optim.AdamW" : "optim.Adam");
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = *params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const Tensor& t = advance_step(i);
    // 1 - beta^t, with t a tensor: one program serves every step.
    const Tensor correction1 = 1.0 - exp(t * std::log(options_.beta1));
    const Tensor correction2 = 1.0 - exp(t * std::log(options_.beta2));
    Tensor param = p;
    if (options_.weight_decay != 0) {
      if (decoupled_) param = param * (1.0 - lr_for(p) * options_.weight_decay);
      else g = g + param * options_.weight_decay;
    }
    Tensor& exp_avg = state(i, "exp_avg", Dims(p.sizes()));
    Tensor& exp_avg_sq = state(i, "exp_avg_sq", Dims(p.sizes()));
    const Tensor m = exp_avg * options_.beta1 + g * (1 - options_.beta1);
    const Tensor v = exp_avg_sq * options_.beta2 + g * g * (1 - options_.beta2);
    assign_in_place(exp_avg, m);
    assign_in_place(exp_avg_sq, v);
    const Tensor denom = sqrt(v / correction2) + options_.eps;
    assign_in_place(p, param - (m / correction1) / denom * lr_for(p));
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
