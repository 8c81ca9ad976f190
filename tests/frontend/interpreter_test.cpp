// A traced graph run by the interpreter gives what the same code gives eagerly, for other sizes
// of a symbolic dim too.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include "core/frontend/tracer.h"
#include "core/frontend/interpreter.h"

namespace kiln {
namespace {

Tensor model(const Tensor& x, const Tensor& w) { return sigmoid(x * w + 0.5) - relu(x) / 2.0; }

TEST(Interpreter, TracedGraphMatchesEager) {
  Tensor w = randn({4}, Device::cpu(), 3);
  Tracer tracer(Device::cpu());
  Graph* graph = nullptr;
  {
    TracingScope scope(tracer);
    Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 2), 4}}, "x");
    tracer.set_outputs({model(x, w)});
    graph = &tracer.graph();
  }
  for (int64_t batch : {1, 2, 5}) {
    Tensor x = randn({batch, 4}, Device::cpu(), 10 + batch);
    std::vector<Tensor> inputs = {x};
    for (const auto& [value, tensor] : tracer.captured()) inputs.push_back(tensor);
    Tensor got = interpret(*graph, inputs).at(0);
    Tensor want = model(x, w);
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>());
  }
}

TEST(Interpreter, SymbolicReshapeTargetsFollowTheInputs) {
  Tracer tracer(Device::cpu());
  {
    TracingScope scope(tracer);
    Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 8), 3, 4}}, "x");
    tracer.set_outputs({relu(reshape(x, {x.shape(0), -1}))});
  }
  for (int64_t batch : {8, 5}) {
    Tensor x = randn({batch, 3, 4}, Device::cpu(), 1);
    Tensor got = interpret(tracer.graph(), {x}).at(0);
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{batch, 12}));
    EXPECT_EQ(got.to_vector<float>(), relu(reshape(x, {batch, 12})).to_vector<float>());
  }
}

TEST(Interpreter, RejectsInputsOfTheWrongType) {
  Tracer tracer(Device::cpu());
  Tensor x = tracer.input({DType::F32, {3}}, "x");
  tracer.set_outputs({relu(x)});
  EXPECT_THROW(interpret(tracer.graph(), {zeros({4})}), Error);
  EXPECT_THROW(interpret(tracer.graph(), {zeros({3}, DType::I32)}), Error);
  EXPECT_THROW(interpret(tracer.graph(), {}), Error);
}

TEST(Interpreter, ErrorsNameTheNodesSourceLine) {
  Tracer tracer(Device::cpu());
  Tensor x = tracer.input({DType::I32, {2}}, "x");
  int line = __LINE__ + 1;
  Tensor y = div(x, x);
  tracer.set_outputs({y});
  try {
    interpret(tracer.graph(), {zeros({2}, DType::I32)});
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("division by zero"), std::string::npos) << msg;
    EXPECT_NE(msg.find("interpreter_test.cpp:" + std::to_string(line)), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln
