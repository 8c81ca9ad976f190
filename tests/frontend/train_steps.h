// One training step of a net with a `loss(x, y)` method: eagerly, and as a step compiled whole
// (fullgraph), for the tests that hold the second to the first.
#pragma once

#include <kiln/kiln.h>

namespace kiln {

template <class Net>
Tensor eager_step(Net& net, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = net.loss(x, y);
  loss.backward();
  opt.step();
  return loss;
}

template <class Net>
auto compiled_step(Net& net, optim::Optimizer& opt) {
  return compile([&net, &opt](const Tensor& x, const Tensor& y) { return eager_step(net, opt, x, y); },
                 {.fullgraph = true});
}

}  // namespace kiln
