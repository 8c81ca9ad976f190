// The losses as compositions of kiln ops; their gradients come from those ops' rules.
#include "core/frontend/losses.h"

#include "core/frontend/factories.h"
#include "core/frontend/ops.h"

namespace kiln {
namespace {

Tensor reduce(const Tensor& loss, Reduction reduction, const Loc& loc) {
  switch (reduction) {
    case Reduction::Mean: return mean(loss, {}, false, loc);
    case Reduction::Sum: return sum(loss, {}, false, loc);
    case Reduction::None: return loss;
  }
  return loss;
}

void check_same_shape(const char* name, const Tensor& input, const Tensor& target, const Loc& loc) {
  if (input.type().shape != target.type().shape)
    throw Error(std::string(name) + " at " + short_location(loc) + ": input " + input.type().str() +
                " and target " + target.type().str() + " must have the same shape");
}

void check_class_input(const char* name, const Tensor& scores, const Loc& loc) {
  if (scores.dim() < 2 || !is_floating(scores.dtype()))
    throw Error(std::string(name) + " at " + short_location(loc) + ": the input must be floating-point " +
                "[N, C] or [N, C, d1, ...], got " + scores.type().str());
}

// Per target element: whether it is counted (not ignore_index), and the one-hot [N, C, ...] mask of
// its class.
struct ClassTargets {
  Tensor counted;  // bool, target's shape
  Tensor one_hot;  // bool, the scores' shape
};

ClassTargets class_targets(const char* name, const Tensor& scores, const Tensor& target, int64_t ignore_index,
                           const Loc& loc) {
  if (is_floating(target.dtype()) || target.dtype() == DType::Bool)
    throw Error(std::string(name) + " at " + short_location(loc) + ": class targets must be integer indices, got " +
                target.type().str());
  Shape want = scores.type().shape;
  want.erase(want.begin() + 1);
  if (target.type().shape != want)
    throw Error(std::string(name) + " at " + short_location(loc) + ": for input " + scores.type().str() +
                " the target must be " + shape_str(want) + " class indices, got " + target.type().str());
  std::vector<SymInt> classes_shape(size_t(scores.dim()), SymInt(1));
  classes_shape[1] = scores.shape(1);
  Tensor classes = reshape(arange(0, double(scores.shape(1).hint()), 1, scores.device(), loc), Dims(classes_shape), loc);
  return {ne(target, double(ignore_index), loc), eq(unsqueeze(target, 1, loc), classes, loc)};
}

// Mean over the counted elements (torch's mean for losses with ignore_index).
Tensor reduce_counted(const Tensor& loss, const Tensor& counted, Reduction reduction, const Loc& loc) {
  if (reduction != Reduction::Mean) return reduce(loss, reduction, loc);
  return div(sum(loss, {}, false, loc), sum(cast(counted, loss.dtype(), loc), {}, false, loc), loc);
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options, Loc loc) {
  check_class_input("nll_loss", log_probs, loc);
  ClassTargets t = class_targets("nll_loss", log_probs, target, options.ignore_index, loc);
  Tensor zero = zeros({}, log_probs.dtype(), log_probs.device(), loc);
  Tensor picked = sum(where(t.one_hot, log_probs, zero, loc), {1}, false, loc);
  Tensor loss = where(t.counted, neg(picked, loc), zero, loc);
  return reduce_counted(loss, t.counted, options.reduction, loc);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options, Loc loc) {
  check_class_input("cross_entropy", logits, loc);
  if (options.label_smoothing < 0 || options.label_smoothing > 1)
    throw Error("cross_entropy at " + short_location(loc) + ": label_smoothing must be in [0, 1], got " +
                std::to_string(options.label_smoothing));
  const double ls = options.label_smoothing;
  Tensor log_probs = log_softmax(logits, 1, loc);
  const double classes = double(logits.shape(1).hint());
  if (is_floating(target.dtype())) {  // class probabilities
    check_same_shape("cross_entropy", logits, target, loc);
    Tensor p = ls > 0 ? add(mul(target, 1 - ls, loc), ls / classes, loc) : target;
    return reduce(neg(sum(mul(p, log_probs, loc), {1}, false, loc), loc), options.reduction, loc);
  }
  ClassTargets t = class_targets("cross_entropy", logits, target, options.ignore_index, loc);
  Tensor zero = zeros({}, logits.dtype(), logits.device(), loc);
  Tensor nll = neg(sum(where(t.one_hot, log_probs, zero, loc), {1}, false, loc), loc);
  if (ls > 0) {  // (1 - ls) nll + ls * mean over classes of -log p
    Tensor uniform = neg(mean(log_probs, {1}, false, loc), loc);
    nll = add(mul(nll, 1 - ls, loc), mul(uniform, ls, loc), loc);
  }
  Tensor loss = where(t.counted, nll, zero, loc);
  return reduce_counted(loss, t.counted, options.reduction, loc);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const LossOptions& options, Loc loc) {
  check_same_shape("mse_loss", input, target, loc);
  Tensor d = sub(input, target, loc);
  return reduce(mul(d, d, loc), options.reduction, loc);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const LossOptions& options, Loc loc) {
  check_same_shape("l1_loss", input, target, loc);
  return reduce(abs(sub(input, target, loc), loc), options.reduction, loc);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1Options& options, Loc loc) {
  check_same_shape("smooth_l1_loss", input, target, loc);
  if (options.beta < 0)
    throw Error("smooth_l1_loss at " + short_location(loc) + ": beta must be >= 0, got " + std::to_string(options.beta));
  Tensor d = abs(sub(input, target, loc), loc);
  if (options.beta == 0) return reduce(d, options.reduction, loc);  // torch: plain L1
  Tensor quadratic = div(mul(mul(d, d, loc), 0.5, loc), options.beta, loc);
  Tensor linear = sub(d, 0.5 * options.beta, loc);
  return reduce(where(lt(d, options.beta, loc), quadratic, linear, loc), options.reduction, loc);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const LossOptions& options,
                                        Loc loc) {
  check_same_shape("binary_cross_entropy_with_logits", input, target, loc);
  Tensor softplus_neg_abs = log(add(exp(neg(abs(input, loc), loc), loc), 1.0, loc), loc);
  Tensor loss = add(sub(relu(input, loc), mul(input, target, loc), loc), softplus_neg_abs, loc);
  return reduce(loss, options.reduction, loc);
}

}  // namespace kiln
