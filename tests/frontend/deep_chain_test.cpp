// Chains deeper than a recursive walk could follow on an 8 MiB stack: eager autograd's backward
// and the release of its graph, tracing and compiling, each over 50,000 ops. Every step must be a
// loop, not a recursion (PyTorch met the same in its autograd graph's destructor).
#include <gtest/gtest.h>

#include <kiln/kiln.h>

namespace kiln {
namespace {

constexpr int kDepth = 50000;

// x - 1 + 1 - 1 ... : exact in f32 for small integers, so the value checks the whole chain ran.
Tensor chain(Tensor y) {
  for (int i = 0; i < kDepth; ++i) y = i % 2 ? y + 1.0 : y - 1.0;
  return y;
}

TEST(DeepChain, EagerBackwardAndReleasingTheAutogradGraphTakeNoStack) {
  Tensor x = from_vector<float>({1, 2, 3});
  x.requires_grad_();
  {
    Tensor loss = sum(chain(x) * 2.0);
    EXPECT_EQ(loss.to_vector<float>(), std::vector<float>{12});
    loss.backward();
  }  // the 50,000 autograd nodes are released here
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 2, 2}));
  {
    Tensor unused = chain(x);  // released without a backward
  }
}

TEST(DeepChain, TracingAndCompilingTakeNoStack) {
  auto f = compile([](const Tensor& x) { return chain(x); });
  const Tensor x = from_vector<float>({1, 2, 3});
  EXPECT_EQ(f(x).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(f(x + 1.0).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(f.stats().compiles, 1);
}

}  // namespace
}  // namespace kiln
