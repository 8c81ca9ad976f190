// kiln::nn layers: parameter registration with PyTorch's default initialization, and forwards that
// run under the module's scope and report the caller's line.
#include "core/frontend/nn/layers.h"

#include <cmath>

#include "core/frontend/autograd.h"
#include "core/frontend/factories.h"
#include "core/frontend/in_place.h"

namespace kiln::nn {

Tensor uniform_init(const Dims& shape, double bound, Device device, Seed seed) {
  return rand(shape, device, seed) * (2 * bound) - bound;
}

Seed derive_seed(Seed seed, uint64_t index) {
  if (!seed) return std::nullopt;
  return *seed ^ (index * 0x9E3779B97F4A7C15ull);  // golden-ratio step keeps the seeds apart
}

namespace {

void check_positive(int64_t value, const char* what, const char* layer) {
  if (value <= 0)
    throw Error(std::string(layer) + ": " + what + " must be positive, got " +
                std::to_string(value));
}


}  // namespace

// ---- Linear: kaiming_uniform(a=sqrt(5)) gives weight and bias the bound 1/sqrt(in_features).
Linear::Linear(int64_t in, int64_t out, bool with_bias, Device device, Seed seed)
    : in_features((check_positive(in, "in_features", "Linear"), in)),
      out_features((check_positive(out, "out_features", "Linear"), out)),
      weight(register_parameter("weight", uniform_init({out, in}, 1 / std::sqrt(double(in)),
                                                       device, derive_seed(seed, 0)))),
      bias(with_bias ? &register_parameter("bias", uniform_init({out}, 1 / std::sqrt(double(in)),
                                                                device, derive_seed(seed, 1)))
                     : nullptr) {}

Tensor Linear::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  return linear(x, weight, bias ? *bias : Tensor(), loc);
}

// ---- Conv2d: the same scheme with fan_in = in_channels / groups * kh * kw.
namespace {

int64_t checked_conv_groups(int64_t in, int64_t out, Int2 kernel, int64_t groups) {
  check_positive(in, "in_channels", "Conv2d");
  check_positive(out, "out_channels", "Conv2d");
  check_positive(groups, "groups", "Conv2d");
  check_positive(kernel.h, "kernel height", "Conv2d");
  check_positive(kernel.w, "kernel width", "Conv2d");
  if (in % groups || out % groups)
    throw Error("Conv2d: in_channels (" + std::to_string(in) + ") and out_channels (" +
                std::to_string(out) + ") must both be divisible by groups (" +
                std::to_string(groups) + ")");
  return groups;
}

double conv_init_bound(int64_t in, int64_t groups, Int2 kernel) {
  return 1 / std::sqrt(double(in / groups * kernel.h * kernel.w));
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Int2 kernel, Int2 stride, Int2 padding, Int2 dilation,
               int64_t groups, bool with_bias, Device device, Seed seed)
    : in_channels(in),
      out_channels(out),
      kernel_size(kernel),
      stride(stride),
      padding(padding),
      dilation(dilation),
      groups(checked_conv_groups(in, out, kernel, groups)),
      weight(register_parameter("weight", uniform_init({out, in / groups, kernel.h, kernel.w},
                                                       conv_init_bound(in, groups, kernel),
                                                       device, derive_seed(seed, 0)))),
      bias(with_bias ? &register_parameter("bias",
                                           uniform_init({out}, conv_init_bound(in, groups, kernel),
                                                        device, derive_seed(seed, 1)))
                     : nullptr) {}

Tensor Conv2d::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  return conv2d(x, weight, bias ? *bias : Tensor(), stride, padding, dilation, groups, loc);
}

// ---- BatchNorm2d: identity at initialization (unit scale, zero shift, mean 0, variance 1).
BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, Device device)
    : num_features((check_positive(num_features, "num_features", "BatchNorm2d"), num_features)),
      eps(eps),
      momentum(momentum),
      weight(register_parameter("weight", ones({num_features}, device))),
      bias(register_parameter("bias", zeros({num_features}, device))),
      running_mean(register_buffer("running_mean", zeros({num_features}, device))),
      running_var(register_buffer("running_var", ones({num_features}, device))),
      num_batches_tracked(register_buffer("num_batches_tracked", zeros({}, DType::I64, device))) {
  if (!(momentum >= 0 && momentum <= 1))
    throw Error("BatchNorm2d: momentum must be in [0, 1], got " + std::to_string(momentum));
}

Tensor BatchNorm2d::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  if (x.dim() != 4)
    throw Error(describe() + " at " + short_location(loc) + ": expects 4-d NCHW input, got " +
                x.type().str());
  if (is_training()) return forward_training(x, loc);
  return batch_norm(x, running_mean, running_var, weight, bias, eps, loc);
}

Tensor BatchNorm2d::forward_training(const Tensor& x, const Loc& loc) {
  auto fail = [&](const std::string& why) {
    throw Error(describe() + " (training mode) at " + short_location(loc) + " on " +
                x.type().str() + ": " + why);
  };
  // Inside a compiled function the running statistics' update is one of the program's writes-back;
  // the count below needs static sizes, so a symbolic batch specializes the compile.
  std::vector<int64_t> s = x.sizes();
  if (s[1] != num_features)
    fail("the input has " + std::to_string(s[1]) + " channels, the layer " +
         std::to_string(num_features));
  const int64_t count = s[0] * s[2] * s[3];
  if (count < 2) fail("expected more than 1 value per channel when training");
  const Dims per_channel{1, num_features, 1, 1};
  Tensor batch_mean = mean(x, {0, 2, 3}, false, loc);
  Tensor centered = x - reshape(batch_mean, per_channel, loc);
  Tensor batch_var = mean(centered * centered, {0, 2, 3}, false, loc);  // biased, as torch normalizes
  Tensor scale = rsqrt(batch_var + eps, loc) * weight;
  Tensor y = centered * reshape(scale, per_channel, loc) + reshape(bias, per_channel, loc);
  NoGradGuard no_grad;
  const double unbiased = double(count) / double(count - 1);
  // In place, as torch's updates are: every handle (a state_dict taken earlier) sees them.
  assign_in_place(running_mean, cast(running_mean * (1 - momentum) + batch_mean * momentum, running_mean.dtype()));
  assign_in_place(running_var, cast(running_var * (1 - momentum) + batch_var * (momentum * unbiased), running_var.dtype()));
  assign_in_place(num_batches_tracked, cast(num_batches_tracked + 1.0, num_batches_tracked.dtype()));
  return y;
}

// ---- LayerNorm
LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps, Device device)
    : normalized_shape(std::move(shape)),
      eps(eps),
      weight([&]() -> Tensor& {
        if (normalized_shape.empty()) throw Error("LayerNorm: normalized_shape is empty");
        for (int64_t d : normalized_shape) check_positive(d, "each normalized dim", "LayerNorm");
        return register_parameter("weight", ones(normalized_shape, device));
      }()),
      bias(register_parameter("bias", zeros(normalized_shape, device))) {}

Tensor LayerNorm::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  return layer_norm(x, normalized_shape, weight, bias, eps, loc);
}

// ---- Embedding: standard normal rows, as PyTorch initializes them.
Embedding::Embedding(int64_t num, int64_t dim, Device device, Seed seed)
    : num_embeddings((check_positive(num, "num_embeddings", "Embedding"), num)),
      embedding_dim((check_positive(dim, "embedding_dim", "Embedding"), dim)),
      weight(register_parameter("weight", randn({num, dim}, device, derive_seed(seed, 0)))) {}

Tensor Embedding::forward(const Tensor& indices, Loc loc) {
  ScopeGuard guard = scope();
  return embedding(indices, weight, loc);
}

// ---- parameterless modules
Tensor Functional::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  return fn_(x, loc);
}

Tensor ReLU::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  return relu(x, loc);
}

// ---- Dropout
Dropout::Dropout(double p, Seed seed, Loc loc) : p(p), seed_(seed) {
  if (!(p >= 0 && p < 1))
    throw Error("Dropout at " + short_location(loc) + ": p must be in [0, 1), got " +
                std::to_string(p));
}

Tensor Dropout::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  if (!is_training() || p == 0) return x;
  if (!is_floating(x.dtype()))
    throw Error(describe() + " at " + short_location(loc) + ": expects a floating-point input, got " +
                x.type().str());
  Tensor draws;
  if (seed_) {
    if (!generator_.defined() || generator_.device() != x.device())
      generator_ = from_bytes(&*seed_, DType::U64, Dims{}, x.device(), loc);
    draws = rand_from(generator_, x.shape(), loc);
  } else {
    draws = rand(x.shape(), x.device(), std::nullopt, loc);
  }
  Tensor keep = ge(draws, p, loc);
  return x * (cast(keep, x.dtype(), loc) * (1 / (1 - p)));
}

Tensor Flatten::forward(const Tensor& x, Loc loc) {
  ScopeGuard guard = scope();
  return flatten(x, start_dim, end_dim, loc);
}

}  // namespace kiln::nn
