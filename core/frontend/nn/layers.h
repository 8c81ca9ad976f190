// kiln::nn layers with PyTorch's constructor arguments, parameter names and default initialization.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/frontend/nn/module.h"
#include "core/frontend/ops.h"

namespace kiln::nn {

// Random initialization takes an optional seed: with one, weights are reproducible (each tensor of
// a layer derives its own seed from it); without, the process-wide generator (manual_seed) is used.
using Seed = std::optional<uint64_t>;

// y = x @ weight^T + bias; weight [out, in], bias [out].
class Linear : public UnaryModule {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         Device device = Device::cpu(), Seed seed = std::nullopt);
  std::string type_name() const override { return "Linear"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  const int64_t in_features, out_features;
  Tensor& weight;
  Tensor* bias;  // null when built with bias = false
};

// NCHW convolution; weight [out, in / groups, kh, kw], bias [out].
class Conv2d : public UnaryModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, Int2 stride = 1,
         Int2 padding = 0, Int2 dilation = 1, int64_t groups = 1, bool bias = true,
         Device device = Device::cpu(), Seed seed = std::nullopt);
  std::string type_name() const override { return "Conv2d"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  const int64_t in_channels, out_channels;
  const Int2 kernel_size, stride, padding, dilation;
  const int64_t groups;
  Tensor& weight;
  Tensor* bias;  // null when built with bias = false
};

// Batch norm over the channels of NCHW input. In training mode it normalizes with the batch's
// mean and biased variance over N, H, W (gradients flow through both) and folds them into the
// running statistics: running = (1 - momentum) * running + momentum * batch, with the unbiased
// variance, and num_batches_tracked += 1. In eval mode it uses the running statistics. Buffers
// match PyTorch's state_dict, num_batches_tracked included, so its checkpoints load strictly.
class BatchNorm2d : public UnaryModule {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       Device device = Device::cpu());
  std::string type_name() const override { return "BatchNorm2d"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  const int64_t num_features;
  const double eps, momentum;
  Tensor& weight;
  Tensor& bias;
  Tensor& running_mean;
  Tensor& running_var;
  Tensor& num_batches_tracked;  // i64 scalar: the training batches seen

 private:
  Tensor forward_training(const Tensor& x, const Loc& loc);
};

// Normalizes over the trailing dims given by normalized_shape ({512} or {2, 3}), then scales
// and shifts.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                     Device device = Device::cpu());
  std::string type_name() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  const std::vector<int64_t> normalized_shape;
  const double eps;
  Tensor& weight;
  Tensor& bias;
};

// Looks up rows of weight [num_embeddings, embedding_dim] by integer index.
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Device device = Device::cpu(),
            Seed seed = std::nullopt);
  std::string type_name() const override { return "Embedding"; }
  Tensor forward(const Tensor& indices, Loc loc = Loc::current()) override;

  const int64_t num_embeddings, embedding_dim;
  Tensor& weight;
};

// A parameterless function as a module, so pointwise steps fit in a Sequential:
// Functional(relu), Functional([](const Tensor& x, Loc loc) { return gelu(x, "tanh", loc); }).
class Functional : public UnaryModule {
 public:
  using Fn = std::function<Tensor(const Tensor&, Loc)>;
  explicit Functional(Fn fn, std::string type_name = "Functional")
      : fn_(std::move(fn)), type_name_(std::move(type_name)) {}
  std::string type_name() const override { return type_name_; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

 private:
  Fn fn_;
  std::string type_name_;
};

class ReLU : public UnaryModule {
 public:
  std::string type_name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;
};

// In training mode zeroes each element with probability p and scales the rest by 1 / (1 - p), so
// the expected value is unchanged; the identity in eval mode. Masks come from rand_from: with a
// seed, from the layer's own generator, whose counter starts at the seed; without, from the
// device's (manual_seed). Inside a compiled function each call draws a new mask, the one the same
// call draws eagerly.
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5, Seed seed = std::nullopt, Loc loc = Loc::current());
  std::string type_name() const override { return "Dropout"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  const double p;

 private:
  Seed seed_;
  Tensor generator_;  // with a seed: the counter, on the device of the last input
};

// Flattens dims start_dim..end_dim; the default keeps the batch dim, as torch.nn.Flatten does.
class Flatten : public UnaryModule {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  std::string type_name() const override { return "Flatten"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override;

  const int64_t start_dim, end_dim;
};

// Internal to the layers: uniform(-bound, bound) initialization, as PyTorch's kaiming and xavier
// uniform schemes reduce to.
Tensor uniform_init(const Dims& shape, double bound, Device device, Seed seed);
// The seed for a layer's index-th tensor: distinct per tensor, still reproducible.
Seed derive_seed(Seed seed, uint64_t index);

}  // namespace kiln::nn
