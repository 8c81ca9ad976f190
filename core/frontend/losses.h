// Loss functions, as torch.nn.functional names them, written in kiln ops so they trace, compile
// and differentiate like any other code. Class dims follow torch: logits are [N, C] or
// [N, C, d1, ...], class-index targets [N] or [N, d1, ...].
#pragma once

#include <cstdint>

#include "core/frontend/tensor.h"

namespace kiln {

enum class Reduction { Mean, Sum, None };

struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;  // class-index targets equal to it add nothing and are not counted
  double label_smoothing = 0;   // in [0, 1]: the target mixes with the uniform distribution
};

// log_softmax over dim 1, then the negative log-likelihood of the target classes. `target` holds
// class indices (an integer tensor) or class probabilities (a floating tensor of logits' shape).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {},
                     Loc loc = Loc::current());

struct NllLossOptions {
  Reduction reduction = Reduction::Mean;
  int64_t ignore_index = -100;
};

// -log_probs[n, target[n]], averaged over the targets not ignored (Mean).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options = {},
                Loc loc = Loc::current());

struct LossOptions {
  Reduction reduction = Reduction::Mean;
};

Tensor mse_loss(const Tensor& input, const Tensor& target, const LossOptions& options = {},
                Loc loc = Loc::current());
Tensor l1_loss(const Tensor& input, const Tensor& target, const LossOptions& options = {},
               Loc loc = Loc::current());

struct SmoothL1Options {
  Reduction reduction = Reduction::Mean;
  double beta = 1.0;  // quadratic below beta, linear above
};

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1Options& options = {},
                      Loc loc = Loc::current());

// The binary cross entropy of sigmoid(input) against `target` in [0, 1], computed from the logits
// in the stable form max(x, 0) - x t + log(1 + exp(-|x|)).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const LossOptions& options = {}, Loc loc = Loc::current());

}  // namespace kiln
