// A small traced model for the trace tests: conv, MLP, layer norm, softmax and one shape decision,
// each op recorded from a line of this file.
#pragma once

#include <memory>

#include "core/frontend/nn/layers.h"
#include "core/frontend/ops.h"
#include "core/frontend/tracer.h"

namespace kiln::testing_model {

struct Traced {
  std::unique_ptr<Tracer> tracer;
};

inline constexpr int kDecisionLine = __LINE__ + 12;  // the `if` in trace_model

inline Traced trace_model() {
  nn::Conv2d conv(3, 4, 3, 1, 1, 1, 1, true, Device::cpu(), 1);
  nn::Linear fc1(4 * 6 * 6, 32, true, Device::cpu(), 2), fc2(32, 10, true, Device::cpu(), 3);
  nn::LayerNorm norm({32});
  Traced t{std::make_unique<Tracer>(Device::cpu())};
  TracingScope scope(*t.tracer);
  Tensor x = t.tracer->input({DType::F32, {SymInt::symbol("s0", 8), 3, 6, 6}}, "x");
  Tensor y = relu(conv(x));
  y = reshape(y, {x.shape(0), 4 * 6 * 6});
  y = gelu(norm(fc1(y)));
  if (x.shape(0) > 4) y = y * 0.5f;
  y = softmax(fc2(y), -1);
  Tensor total = sum(y * y, {1});
  t.tracer->set_outputs({y, total});
  return t;
}

}  // namespace kiln::testing_model
