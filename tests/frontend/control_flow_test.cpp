// kiln::cond: eagerly one branch runs; compiled, one program without a graph break serves both
// predicate values on every device, each output selected on the device; values checked against
// the branches computed by hand; mismatched branches are errors naming the caller's line.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include "backends/backend.h"

namespace kiln {
namespace {

// then: x * 2 + 1, else: x - 3 (the predicate: sum(x) > 0).
std::vector<float> by_hand(const std::vector<float>& x) {
  float sum = 0;
  for (float v : x) sum += v;
  std::vector<float> y;
  for (float v : x) y.push_back(sum > 0 ? v * 2 + 1 : v - 3);
  return y;
}

std::vector<Tensor> branch_fn(const Tensor& x) {
  return cond(
      gt(sum(x), 0.0), [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0 + 1.0}; },
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] - 3.0}; }, {x});
}

std::vector<Device> devices() {
  std::vector<Device> out;
  for (const DeviceEntry& e : available_devices())
    if (e.kind != BackendKind::Null) out.push_back(Device(e.kind, e.index));
  return out;
}

TEST(Cond, EagerlyOnlyTheChosenBranchRuns) {
  int then_calls = 0, else_calls = 0;
  auto then_fn = [&](const std::vector<Tensor>& in) { ++then_calls; return std::vector<Tensor>{in[0] + 1.0}; };
  auto else_fn = [&](const std::vector<Tensor>& in) { ++else_calls; return std::vector<Tensor>{in[0] - 1.0}; };
  const Tensor x = from_vector<float>({1, 2, 3}, {3});
  const Tensor yes = gt(sum(x), 0.0), no = reshape(lt(sum(x), 0.0), {1});
  EXPECT_EQ(cond(yes, then_fn, else_fn, {x})[0].to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(cond(no, then_fn, else_fn, {x})[0].to_vector<float>(), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(then_calls, 1);
  EXPECT_EQ(else_calls, 1);
}

TEST(Cond, OneCompiledProgramWithoutAGraphBreakServesBothBranches) {
  for (const Device& device : devices()) {
    auto fast = compile([](const Tensor& x) { return branch_fn(x)[0]; }, {.fullgraph = true});
    for (const std::vector<float>& x : {std::vector<float>{1, -2, 4}, std::vector<float>{-5, 1, 2},
                                        std::vector<float>{0.5f, 0.25f, 0}}) {
      const Tensor y = fast(from_vector(x, {3}, device));
      EXPECT_EQ(y.to_vector<float>(), by_hand(x)) << device.name();
    }
    const CompileStats s = fast.stats();
    EXPECT_EQ(s.compiles, 1) << device.name();
    EXPECT_EQ(s.graph_breaks, 0) << device.name();
    EXPECT_EQ(s.cache_hits, 2) << device.name();
  }
}

TEST(Cond, OpsInsideABranchNameItsLinesAndScope) {
  auto fast = compile([](const Tensor& x) { return branch_fn(x)[0]; });
  fast(from_vector<float>({1, 2}, {2}));
  bool then_scope = false, else_scope = false;
  for (const trace::BundleNode& n : fast.bundle().nodes)
    for (const Origin& o : n.origins) {
      then_scope = then_scope || (o.scope == "cond.then" && o.file.find("control_flow_test.cpp") != std::string::npos);
      else_scope = else_scope || (o.scope == "cond.else" && o.file.find("control_flow_test.cpp") != std::string::npos);
    }
  EXPECT_TRUE(then_scope);
  EXPECT_TRUE(else_scope);
}

TEST(Cond, BranchesThatDifferInShapeAreAnErrorNamingTheCallersLine) {
  auto fast = compile([](const Tensor& x) {
    return cond(gt(sum(x), 0.0), [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0]}; },
                [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0])}; }, {x})[0];
  }, {.fullgraph = true});
  try {
    fast(from_vector<float>({1, 2}, {2}));
    FAIL() << "mismatched branches compiled";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kiln::cond at control_flow_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("then_fn returned (f32[2]), else_fn (f32[])"), std::string::npos) << msg;
  }
}

TEST(Cond, APredicateThatIsNotOneBoolIsAnError) {
  const Tensor x = from_vector<float>({1, 2}, {2});
  auto same = [](const std::vector<Tensor>& in) { return in; };
  EXPECT_THROW(cond(x, same, same, {x}), Error);
}

// Doubling x until its sum passes 100: eagerly a host loop; compiled, each predicate read is a
// graph break, so the function still gives the loop's result, and fullgraph refuses it.
std::vector<Tensor> doubling(const Tensor& x) {
  return while_loop([](const std::vector<Tensor>& c) { return le(sum(c[0]), 100.0); },
                    [](const std::vector<Tensor>& c) { return std::vector<Tensor>{c[0] * 2.0}; }, {x});
}

TEST(WhileLoop, RunsTheBodyUntilThePredicateIsFalse) {
  EXPECT_EQ(doubling(from_vector<float>({1, 2}, {2}))[0].to_vector<float>(), (std::vector<float>{64, 128}));
  EXPECT_EQ(doubling(from_vector<float>({200, 0}, {2}))[0].to_vector<float>(), (std::vector<float>{200, 0}));
  auto fast = compile([](const Tensor& x) { return doubling(x)[0]; });
  EXPECT_EQ(fast(from_vector<float>({3, 0}, {2})).to_vector<float>(), (std::vector<float>{192, 0}));
  EXPECT_GE(fast.stats().graph_breaks, 1);
  auto strict = compile([](const Tensor& x) { return doubling(x)[0]; }, {.fullgraph = true});
  EXPECT_THROW(strict(from_vector<float>({3, 0}, {2})), Error);
}

TEST(WhileLoop, ABodyThatChangesAShapeIsAnErrorNamingTheCallersLine) {
  try {
    while_loop([](const std::vector<Tensor>& c) { return lt(sum(c[0]), 10.0); },
               [](const std::vector<Tensor>& c) { return std::vector<Tensor>{concat({c[0], c[0]}, 0)}; },
               {from_vector<float>({1}, {1})});
    FAIL() << "a growing carried value was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kiln::while_loop at control_flow_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("took (f32[1]) and returned (f32[2])"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln
