// kiln::optim: optimizers and learning-rate schedules, with torch's update rules and names.
// A step updates each parameter in place: the parameter's TensorImpl gets the new values' buffer,
// so every handle to it (the module's slot, the caller's copies) sees the new weights with no
// rebinding, while buffers that autograd saved or compiled programs copied keep the old values
// (kiln never writes into a buffer a tensor already owns; a new buffer is also what tells a
// reduce-overhead program that its copy of the input is stale).
//
// All the state an update reads is tensors: per parameter its step count ("step", in the
// parameter's dtype, as torch keeps it) and buffers (zeros before the first step), and the
// learning rate, so a step is the same ops eagerly and inside kiln::compile. There the updates
// become writes of the compiled program, applied to the same tensors after it runs (the step is
// functionalized); the first step's special cases (SGD's momentum buffer starting as the gradient)
// are selects on the step count, not host branches. Updates go through assign_in_place
// (core/frontend/in_place.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"

namespace kiln::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor*> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Drops every parameter's gradient (torch's zero_grad(set_to_none=True)).
  void zero_grad();
  // One update from the parameters' current gradients; parameters without one are skipped.
  virtual void step() = 0;

  double lr() const { return lr_; }
  // Updates the learning-rate tensors in place (outside compiled steps: schedules run between them).
  void set_lr(double lr);
  // "lr", "step", and per parameter i "<i>.<name>" for its state (momentum_buffer, exp_avg, ...).
  virtual std::map<std::string, Tensor> state_dict() const;
  virtual void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // Parameter i's state `name`, zeros of `shape` (the parameter's dtype and device) until written.
  Tensor& state(size_t i, const std::string& name, const Dims& shape);
  // Parameter i's step count, advanced by one (the value after the increment).
  Tensor& advance_step(size_t i);
  // The learning rate as a rank-0 tensor of the parameter's dtype and device.
  const Tensor& lr_for(const Tensor& param);
  std::vector<Tensor*> params_;
  double lr_;
  std::vector<std::map<std::string, Tensor>> state_;  // per parameter
  std::map<std::string, Tensor> lr_tensors_;          // by dtype and device
};

struct SGDOptions {
  double lr;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, SGDOptions options);
  void step() override;

 private:
  SGDOptions options_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, AdamOptions options = {});
  void step() override;

 protected:
  // decoupled: AdamW's weight decay (p *= 1 - lr wd) instead of Adam's (g += wd p).
  Adam(std::vector<Tensor*> params, AdamOptions options, bool decoupled);

 private:
  AdamOptions options_;
  bool decoupled_ = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor*> params, AdamWOptions options = {});
};

// lr = initial * gamma^(epoch / step_size), updated by each step().
class StepLR {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  void step();

 private:
  Optimizer& optimizer_;
  int64_t step_size_;
  double gamma_, initial_;
  int64_t epoch_ = 0;
};

// lr = eta_min + (initial - eta_min) (1 + cos(pi epoch / t_max)) / 2, updated by each step().
class CosineAnnealingLR {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);
  void step();

 private:
  Optimizer& optimizer_;
  int64_t t_max_;
  double eta_min_, initial_;
  int64_t epoch_ = 0;
};

}  // namespace kiln::optim
