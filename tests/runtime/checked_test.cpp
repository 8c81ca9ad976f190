// Checked mode names the source line of the first NaN/Inf or bad index (cpu and Vulkan), and
// accuracy bisection names the first node past tolerance, checked against planted errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <kiln/kiln.h>

#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"
#include "core/runtime/accuracy.h"
#include "core/runtime/checked.h"
#include "core/runtime/interpreter.h"
#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

std::string here(int line) { return "checked_test.cpp:" + std::to_string(line); }

// The message of the kiln::Error `f` throws; fails the test when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

void expect_log_nan_reported_at_its_line(Device device) {
  CheckedModeScope checked;
  Tensor x = from_vector<float>({1.0f, -2.0f, 3.0f}, device);
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { Tensor y = log(x); });
  EXPECT_NE(msg.find("checked mode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'log'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN at element 1"), std::string::npos) << msg;  // log(-2): element 1
  EXPECT_NE(msg.find("first produced by: " + here(line)), std::string::npos) << msg;
}

void expect_bad_embedding_index_reported(Device device) {
  CheckedModeScope checked;
  Tensor weight = from_vector<float>({0, 1, 2, 3, 4, 5}, Dims{3, 2}, device);
  Tensor ids = from_vector<int64_t>({0, 2, 7, 1}, device);  // 7 is past the 3 rows
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { Tensor e = embedding(ids, weight); });
  EXPECT_NE(msg.find("index 7 at position 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("first produced by: " + here(line)), std::string::npos) << msg;
}

TEST(CheckedMode, LogOfNegativeReportsItsLineOnCpu) {
  expect_log_nan_reported_at_its_line(Device::cpu());
}

TEST(CheckedMode, LogOfNegativeReportsItsLineOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  expect_log_nan_reported_at_its_line(vk);
}

TEST(CheckedMode, OutOfRangeEmbeddingIndexReportedOnCpu) {
  expect_bad_embedding_index_reported(Device::cpu());
}

TEST(CheckedMode, OutOfRangeEmbeddingIndexReportedOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  expect_bad_embedding_index_reported(vk);
}

TEST(CheckedMode, InfFromDivisionByZeroIsReportedWithItsSign) {
  CheckedModeScope checked;
  Tensor a = from_vector<float>({1.0f, -1.0f});
  Tensor b = from_vector<float>({2.0f, 0.0f});
  std::string msg = error_of([&] { Tensor c = a / b; });
  EXPECT_NE(msg.find("-Inf at element 1"), std::string::npos) << msg;
}

TEST(CheckedMode, NegativeIndicesInRangeAndFiniteValuesPass) {
  CheckedModeScope checked;
  Tensor weight = from_vector<float>({0, 1, 2, 3, 4, 5}, Dims{3, 2});
  Tensor e = embedding(from_vector<int64_t>({-1, 0}), weight);  // -1: the last row
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{4, 5, 0, 1}));
  EXPECT_NEAR(log(from_vector<float>({std::exp(1.0f)})).item<float>(), 1.0f, 1e-6f);
}

TEST(CheckedMode, OffByDefaultSoNaNFlowsThrough) {
  CheckedModeScope off(false);
  Tensor y = log(from_vector<float>({-2.0f}));
  EXPECT_TRUE(std::isnan(y.item<float>()));  // std::log(-2) is NaN too
}

TEST(CheckedMode, PassedOnNaNSaysItCameFromTheInput) {
  CheckedModeScope checked;
  Tensor x = from_vector<float>({NAN, 1.0f});
  std::string msg = error_of([&] { Tensor y = x + 1.0; });
  EXPECT_NE(msg.find("input 0 already held non-finite"), std::string::npos) << msg;
}

TEST(CheckedMode, InfPassedOnFromAMaskIsAllowedButNaNFromItIsNot) {
  CheckedModeScope checked;
  Tensor scores = from_vector<float>({1.0f, -INFINITY, 2.0f});  // an attention row, one masked
  Tensor p = softmax(scores, 0);
  std::vector<float> got = p.to_vector<float>();
  float e1 = std::exp(1.0f), e2 = std::exp(2.0f);  // oracle: softmax by hand, masked entry 0
  EXPECT_NEAR(got[0], e1 / (e1 + e2), 1e-6f);
  EXPECT_EQ(got[1], 0.0f);
  Tensor masked = scores * 2.0;  // -inf passes through unflagged
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { Tensor z = masked - masked; });  // -inf - -inf = NaN
  EXPECT_NE(msg.find("NaN at element 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(here(line)), std::string::npos) << msg;
}

TEST(CheckedMode, InterpretedGraphReportsTheTracedLineAndScope) {
  Tracer tracer(Device::cpu());
  int line = 0;
  {
    TracingScope scope(tracer);
    Tensor x = tracer.input({DType::F32, {3}}, "x");
    ScopeGuard block("encoder.block0");
    line = __LINE__ + 1;
    Tensor y = log(x) * 2.0;
    tracer.set_outputs({y});
  }
  CheckedModeScope checked;
  std::string msg = error_of([&] { interpret(tracer.graph(), {from_vector<float>({1, 2, -3})}); });
  EXPECT_NE(msg.find("first produced by: " + here(line)), std::string::npos) << msg;
  EXPECT_NE(msg.find("[encoder.block0]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN at element 2"), std::string::npos) << msg;
}

// A traced graph of four computing nodes; `lines` receives each op's source line.
struct SmallModel {
  Tracer tracer{Device::cpu()};
  int sigmoid_line = 0, matmul_line = 0;
  SmallModel() {
    TracingScope scope(tracer);
    Tensor x = tracer.input({DType::F32, {4, 8}}, "x");
    Tensor w = tracer.input({DType::F32, {8, 3}}, "w");
    Tensor h = x * 0.5 + 0.25;
    sigmoid_line = __LINE__ + 1;
    Tensor s = sigmoid(h);
    matmul_line = __LINE__ + 1;
    Tensor y = matmul(s, w);
    tracer.set_outputs({relu(y)});
  }
};

TEST(Accuracy, CpuAgainstItselfIsExact) {
  SmallModel m;
  AccuracyReport r = check_accuracy(m.tracer.graph(), {randn({4, 8}, Device::cpu(), 1),
                                                       randn({8, 3}, Device::cpu(), 2)},
                                    Device::cpu(), 0, 0);
  EXPECT_TRUE(r.ok()) << r.str();
  EXPECT_GE(r.nodes.size(), 4u);
  for (const NodeAccuracy& n : r.nodes) EXPECT_EQ(n.max_abs_error, 0.0) << n.op;
}

TEST(Accuracy, PerturbedNodeIsNamedFirstAndLaterNodesStayClean) {
  SmallModel m;
  // The planted error: +0.01 on every sigmoid output; the reference feeds matmul clean inputs.
  AccuracyTap plant = [](const Node& node, std::vector<Tensor>& outs) {
    if (node.kind != OpKind::Sigmoid) return;
    std::vector<float> v = outs[0].to_vector<float>();
    for (float& f : v) f += 0.01f;
    outs[0] = from_vector<float>(v, Dims(outs[0].sizes()));
  };
  AccuracyReport r = check_accuracy(m.tracer.graph(), {randn({4, 8}, Device::cpu(), 1),
                                                       randn({8, 3}, Device::cpu(), 2)},
                                    Device::cpu(), 1e-5, 1e-6, plant);
  ASSERT_FALSE(r.ok()) << r.str();
  const NodeAccuracy& bad = *r.first_bad_node();
  EXPECT_EQ(bad.op, "sigmoid");
  EXPECT_NEAR(bad.max_abs_error, 0.01, 1e-5);
  ASSERT_FALSE(bad.provenance.empty());
  EXPECT_EQ(bad.provenance.origins[0].line, m.sigmoid_line);
  EXPECT_NE(r.str().find(here(m.sigmoid_line)), std::string::npos) << r.str();
  for (const NodeAccuracy& n : r.nodes)
    if (n.op != "sigmoid") EXPECT_TRUE(n.within_tolerance) << n.op << " " << n.worst;
}

TEST(Accuracy, VulkanGraphIsWithinTolerance) {
  KILN_REQUIRE_VULKAN(vk);
  SmallModel m;
  AccuracyReport r = check_accuracy(m.tracer.graph(), {randn({4, 8}, Device::cpu(), 1),
                                                       randn({8, 3}, Device::cpu(), 2)},
                                    vk, 1e-4, 1e-5);
  EXPECT_TRUE(r.ok()) << r.str();
  EXPECT_EQ(r.device, vk.name());
  double worst = 0;
  for (const NodeAccuracy& n : r.nodes) worst = std::max(worst, n.max_abs_error);
  std::printf("vulkan vs cpu, worst max abs error over %zu nodes: %g\n", r.nodes.size(), worst);
}

TEST(Accuracy, WrongInputCountIsAnError) {
  SmallModel m;
  std::string msg = error_of([&] {
    check_accuracy(m.tracer.graph(), {randn({4, 8})}, Device::cpu(), 1e-5, 1e-6);
  });
  EXPECT_NE(msg.find("2 inputs, 1 were given"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
