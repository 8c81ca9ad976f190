// Checked mode names the source line of the first NaN/Inf or bad index (cpu and Vulkan, eager and
// compiled), and accuracy bisection names the first node (or compiled kernel) past tolerance,
// checked against planted errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <kiln/kiln.h>

#include "core/frontend/scope.h"
#include "core/frontend/tracer.h"
#include "core/runtime/accuracy.h"
#include "core/runtime/checked.h"
#include "core/frontend/interpreter.h"
#include "core/runtime/planned_program.h"
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

// An Inf born in a backward kernel is reported at the forward op's line, marked as its gradient:
// d sqrt(x)/dx at x = 0 divides by zero.
void expect_backward_inf_reported_at_the_forward_line(Device device) {
  CheckedModeScope checked;
  Tensor x = from_vector<float>({0.0f, 4.0f}, device);
  x.requires_grad_();
  int line = __LINE__ + 1;
  Tensor y = sqrt(x);
  std::string msg = error_of([&] { sum(y).backward(); });
  EXPECT_NE(msg.find("checked mode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gradient of sqrt at " + here(line)), std::string::npos) << msg;
  EXPECT_NE(msg.find("Inf"), std::string::npos) << msg;
}

TEST(CheckedMode, InfInABackwardReportsTheForwardLineOnCpu) {
  expect_backward_inf_reported_at_the_forward_line(Device::cpu());
}

TEST(CheckedMode, InfInABackwardReportsTheForwardLineOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  expect_backward_inf_reported_at_the_forward_line(vk);
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

TEST(Accuracy, RefAgainstItselfIsExact) {
  SmallModel m;
  AccuracyReport r = check_accuracy(m.tracer.graph(), device_tensors({randn({4, 8}, Device::ref(), 1),
                                                       randn({8, 3}, Device::ref(), 2)}),
                                    Device::ref(), 0, 0);
  EXPECT_TRUE(r.ok()) << r.str();
  EXPECT_GE(r.nodes.size(), 4u);
  for (const NodeAccuracy& n : r.nodes) EXPECT_EQ(n.max_abs_error, 0.0) << n.op;
}

TEST(Accuracy, PerturbedNodeIsNamedFirstAndLaterNodesStayClean) {
  SmallModel m;
  // The planted error: +0.01 on every sigmoid output; the reference feeds matmul clean inputs.
  AccuracyTap plant = [](const Node& node, std::vector<DeviceTensor>& outs) {
    if (node.kind != OpKind::Sigmoid) return;
    std::vector<float> v = outs[0].to_host<float>();
    for (float& f : v) f += 0.01f;
    outs[0] = DeviceTensor::upload(outs[0].type, v.data(), outs[0].device);
  };
  AccuracyReport r = check_accuracy(m.tracer.graph(), device_tensors({randn({4, 8}, Device::cpu(), 1),
                                                       randn({8, 3}, Device::cpu(), 2)}),
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
  AccuracyReport r = check_accuracy(m.tracer.graph(), device_tensors({randn({4, 8}, Device::cpu(), 1),
                                                       randn({8, 3}, Device::cpu(), 2)}),
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
    check_accuracy(m.tracer.graph(), device_tensors({randn({4, 8})}), Device::cpu(), 1e-5, 1e-6);
  });
  EXPECT_NE(msg.find("2 inputs, 1 were given"), std::string::npos) << msg;
}


// --- Compiled programs -------------------------------------------------------------------------

// A pointwise chain the compiler fuses into one kernel; log of a negative at kLogLine. With
// x = {1, 8, 3}: 2x - 10 = {-8, 6, -4}, so elements 0 and 2 are NaN.
Tensor log_chain(const Tensor& x) {
  Tensor a = x * 2.0;
  Tensor b = a - 10.0;
  Tensor c = log(b);
  return c + 1.0;
}
constexpr int kLogLine = __LINE__ - 3;

void expect_compiled_log_nan_reported_at_its_line(Device device) {
  auto f = compile(log_chain);
  Tensor x = from_vector<float>({1.0f, 8.0f, 3.0f}, device);
  {
    // Off: the NaN flows through (and the function compiles once, before the checked call).
    std::vector<float> y = f(x).to_vector<float>();
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_FLOAT_EQ(y[1], std::log(6.0f) + 1.0f);
  }
  CheckedModeScope checked;
  std::string msg = error_of([&] { f(x); });
  EXPECT_NE(msg.find("checked mode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'log'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN at element 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("first produced by: " + here(kLogLine)), std::string::npos) << msg;
  EXPECT_EQ(f.stats().compiles, 1);
}

TEST(CheckedMode, CompiledFunctionNaNReportsItsLineOnCpu) {
  expect_compiled_log_nan_reported_at_its_line(Device::cpu());
}

TEST(CheckedMode, CompiledFunctionNaNInsideAFusedKernelReportsItsLineOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  auto f = compile(log_chain);
  f(from_vector<float>({1.0f, 8.0f, 3.0f}, vk));
  ASSERT_EQ(f.stats().program.kernels, 1) << "the chain should be one fused kernel";
  expect_compiled_log_nan_reported_at_its_line(vk);
  CheckedModeScope checked;
  auto g = compile(log_chain);
  std::string msg = error_of([&] { g(from_vector<float>({1.0f, 8.0f, 3.0f}, vk)); });
  EXPECT_NE(msg.find("compiled kernel 0"), std::string::npos) << msg;
  std::printf("%s\n", msg.c_str());
}

TEST(CheckedMode, CompiledFunctionOutOfRangeEmbeddingIndexReportedOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  static int line = 0;
  auto f = compile([](const Tensor& ids, const Tensor& weight) {
    line = __LINE__ + 1;
    return embedding(ids, weight) * 2.0;
  });
  Tensor weight = from_vector<float>({0, 1, 2, 3, 4, 5}, Dims{3, 2}, vk);
  Tensor ids = from_vector<int64_t>({0, 2, 7, 1}, vk);  // 7 is past the 3 rows
  f(from_vector<int64_t>({0, 2, 1, 1}, vk), weight);  // compiles with good indices
  CheckedModeScope checked;
  std::string msg = error_of([&] { f(ids, weight); });
  EXPECT_NE(msg.find("index 7 at position 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("first produced by: " + here(line)), std::string::npos) << msg;
}

TEST(CheckedMode, CompiledMaskInfPassesAndFiniteResultsMatchEager) {
  KILN_REQUIRE_VULKAN(vk);
  CheckedModeScope checked;
  // The kernel writes -inf (the scan sees it); its ops on the reference pass it on from the mask.
  auto f = compile([](const Tensor& x, const Tensor& mask) { return (x + mask) * 2.0 + exp(x); });
  Tensor x = from_vector<float>({0.0f, 1.0f, 2.0f}, vk);
  Tensor mask = from_vector<float>({0.0f, -INFINITY, 0.0f}, vk);
  std::vector<float> y = f(x, mask).to_vector<float>();
  EXPECT_NEAR(y[0], 1.0f, 1e-6f);  // oracle by hand: 2 (x + m) + e^x
  EXPECT_EQ(y[1], -INFINITY);
  EXPECT_NEAR(y[2], 4.0f + std::exp(2.0f), 1e-4f);
}

TEST(Accuracy, PerKernelVulkanIsWithinToleranceOneRowPerKernel) {
  KILN_REQUIRE_VULKAN(vk);
  SmallModel m;
  KernelAccuracyReport r = check_kernel_accuracy(
      m.tracer.graph(), device_tensors({randn({4, 8}, Device::cpu(), 1), randn({8, 3}, Device::cpu(), 2)}),
      vk, 1e-4, 1e-5);
  EXPECT_TRUE(r.ok()) << r.str();
  PlannedProgram program(m.tracer.graph(), vk);
  EXPECT_EQ(r.kernels.size(), program.kernels().size());
  // The fused kernel (mul, add, sigmoid) is one row: fewer rows than computing nodes.
  EXPECT_LT(r.kernels.size(), 4u) << r.str();
  std::printf("%s", r.str().c_str());
}

TEST(Accuracy, PerturbedCompiledKernelIsNamedWithItsLinesAndLaterKernelsStayClean) {
  KILN_REQUIRE_VULKAN(vk);
  SmallModel m;
  int sigmoid_id = -1;
  for (const Node* n : m.tracer.graph().nodes())
    if (n->kind == OpKind::Sigmoid) sigmoid_id = n->id;
  KernelAccuracyTap plant = [&](size_t, const PlannedKernel& k, std::map<int, DeviceTensor>& outs) {
    if (std::find(k.origins.begin(), k.origins.end(), sigmoid_id) == k.origins.end()) return;
    for (auto& [id, t] : outs) {
      std::vector<float> v = t.to_host<float>();
      for (float& f : v) f += 0.01f;
      t = DeviceTensor::upload(t.type, v.data(), vk);
    }
  };
  KernelAccuracyReport r = check_kernel_accuracy(
      m.tracer.graph(), device_tensors({randn({4, 8}, Device::cpu(), 1), randn({8, 3}, Device::cpu(), 2)}),
      vk, 1e-4, 1e-5, plant);
  ASSERT_FALSE(r.ok()) << r.str();
  const KernelAccuracy& bad = *r.first_bad_kernel();
  EXPECT_NE(std::find(bad.origins.begin(), bad.origins.end(), sigmoid_id), bad.origins.end());
  EXPECT_NEAR(bad.max_abs_error, 0.01, 1e-4);
  EXPECT_EQ(bad.worst_node, sigmoid_id);
  ASSERT_FALSE(bad.provenance.empty());
  EXPECT_EQ(bad.provenance.origins[0].line, m.sigmoid_line);
  ASSERT_FALSE(bad.source_lines.empty()) << r.str();
  EXPECT_NE(bad.source_lines[0].find("line "), std::string::npos) << bad.source_lines[0];
  EXPECT_NE(r.str().find(here(m.sigmoid_line)), std::string::npos) << r.str();
  for (const KernelAccuracy& k : r.kernels)
    if (&k != &bad) EXPECT_TRUE(k.within_tolerance) << k.name << " " << k.worst;
}

TEST(Accuracy, PerKernelOnTheInterpreterPointsAtThePerNodeCheck) {
  SmallModel m;
  std::string msg = error_of([&] {
    check_kernel_accuracy(m.tracer.graph(), device_tensors({randn({4, 8}), randn({8, 3})}), Device::ref(),
                          1e-5, 1e-6);
  });
  EXPECT_NE(msg.find("use check_accuracy"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
