// Tensor handles: factories, devices, host read-back, tracing into a graph with provenance.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include "core/frontend/tracer.h"
#include "core/ir/graph.h"

namespace kiln {
namespace {

TEST(Tensor, FactoriesFillAsAsked) {
  EXPECT_EQ(zeros({2, 3}).to_vector<float>(), std::vector<float>(6, 0));
  EXPECT_EQ(ones({2}, DType::I32).to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(full({3}, 2.5).to_vector<double>(), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25).to_vector<float>(), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(arange(1, 2, 0.25).dtype(), DType::F32);
  Tensor t = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.shape(-1).value(), 3);
  EXPECT_THROW(from_vector<float>({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(t.shape(2), Error);
}

TEST(Tensor, RandomIsSeededAndDistributed) {
  Tensor a = randn({1000}, Device::cpu(), 42), b = randn({1000}, Device::cpu(), 42);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), randn({1000}, Device::cpu(), 43).to_vector<float>());
  double mean = 0, var = 0;
  for (float v : a.to_vector<float>()) mean += v / 1000.0;
  for (float v : a.to_vector<float>()) var += (v - mean) * (v - mean) / 1000.0;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
  for (float v : rand({1000}, Device::cpu(), 7).to_vector<float>()) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
}

TEST(Tensor, ItemNeedsOneElement) {
  EXPECT_EQ(full({1}, 3.0).item<float>(), 3.0f);
  EXPECT_THROW(zeros({2}).item<float>(), Error);
  EXPECT_THROW(Tensor().dtype(), Error);
}

TEST(Device, ParseAndNames) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::cpu().name(), "cpu");
  EXPECT_THROW(Device::parse("tpu"), Error);
  EXPECT_THROW(Device::parse("cpu:x"), Error);
  EXPECT_THROW(Device::parse("cpu:3"), Error);  // only cpu:0 exists
  Device best = Device::best();
  EXPECT_NO_THROW(best.backend());
}

TEST(Device, TensorsOnDifferentDevicesAreRejected) {
  Tensor a = zeros({2}), b = zeros({2}).to(Device::parse("null"));
  EXPECT_EQ(b.device().name(), "null");
  EXPECT_THROW(a + b, Error);
}

TEST(Device, MemoryStatsCountBuffersUntilTheyAreFreed) {
  const Device device = Device::cpu();
  const int64_t before = device.memory_stats().allocated_bytes;
  {
    Tensor a = zeros({1000});  // 4,000 bytes
    EXPECT_EQ(device.memory_stats().allocated_bytes, before + 4000);
    EXPECT_GE(device.memory_stats().peak_allocated_bytes, before + 4000);
  }
  EXPECT_EQ(device.memory_stats().allocated_bytes, before);
  EXPECT_GE(device.memory_stats().peak_allocated_bytes, before + 4000);  // the peak stays
  device.reset_peak_memory();
  EXPECT_EQ(device.memory_stats().peak_allocated_bytes, before);
}

TEST(Device, MemoryStatsCountACompiledProgramsArena) {
  const Device device = Device::cpu();
  const int64_t before = device.memory_stats().allocated_bytes;
  Tensor x = randn({1000}, device, 1);
  auto f = compile([](const Tensor& t) { return relu(exp(t * 2.0) - t) * sum(t); });
  Tensor y = f(x);
  const int64_t planned = f.stats().program.planned_bytes;
  EXPECT_GT(planned, 0);  // the sum's result lives in the arena between kernels
  // x, y and the program's arena are alive now.
  EXPECT_GE(device.memory_stats().allocated_bytes, before + 8000 + planned);
}

TEST(Tracing, RecordsNodesWithProvenanceInsteadOfRunning) {
  Tracer tracer(Device::cpu());
  TracingScope scope(tracer);
  SymInt batch = SymInt::symbol("s0", 8);
  Tensor x = tracer.input({DType::F32, {batch, 4}}, "x");
  Tensor w = ones({4});  // an eager tensor used in the trace is captured
  int line = __LINE__ + 1;
  Tensor y = relu(x * w + 1.0);
  tracer.set_outputs({y});
  const Graph& g = tracer.graph();
  ASSERT_EQ(g.num_nodes(), 4u);  // mul, constant, add, relu
  const Node& relu_node = *g.nodes().back();
  EXPECT_EQ(relu_node.kind, OpKind::Relu);
  EXPECT_EQ(relu_node.output()->type.str(), "f32[s0,4]");
  ASSERT_EQ(relu_node.provenance.origins.size(), 1u);
  EXPECT_EQ(relu_node.provenance.origins[0].line, line);
  EXPECT_NE(relu_node.provenance.origins[0].file.find("tensor_test.cpp"), std::string::npos);
  EXPECT_EQ(tracer.captured().size(), 1u);
  EXPECT_THROW(y.to_vector<float>(), Error);  // reading traced data is a graph break
}

TEST(Tracing, ShapeDecisionsBecomeGuardsAtTheCallersLine) {
  Tracer tracer(Device::cpu());
  TracingScope scope(tracer);
  Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 16), 3}}, "x");
  int line = __LINE__ + 1;
  bool big = x.shape(0) > 10;
  EXPECT_TRUE(big);
  ASSERT_EQ(tracer.guards().size(), 1u);
  const ShapeGuard& g = tracer.guards()[0];
  EXPECT_EQ(g.lhs.str(), "s0");
  EXPECT_EQ(g.op, GuardOp::Gt);
  ASSERT_TRUE(g.where.has_value());
  EXPECT_EQ(int(g.where->line()), line);
}

}  // namespace
}  // namespace kiln
