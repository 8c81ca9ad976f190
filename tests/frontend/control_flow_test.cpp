// kiln::cond: eagerly one branch runs; compiled, one program without a graph break serves both
// predicate values on every device, each output selected on the device; values checked against
// the branches computed by hand; mismatched branches are errors naming the caller's line.
// kiln::while_loop: eagerly a host loop; compiled, one program without a graph break runs each
// input's number of iterations on every device, checked against the loop computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <kiln/kiln.h>

#include "backends/backend.h"
#include "support/devices.h"

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

std::vector<Device> devices() { return testing::computing_devices(); }

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

// Doubling x until its sum passes 100: eagerly a host loop; compiled, one while_loop node whose
// program runs as many iterations as each input needs, with no graph break and no recompile.
std::vector<Tensor> doubling(const Tensor& x) {
  return while_loop([](const std::vector<Tensor>& c) { return le(sum(c[0]), 100.0); },
                    [](const std::vector<Tensor>& c) { return std::vector<Tensor>{c[0] * 2.0}; }, {x});
}

std::vector<float> doubled_by_hand(std::vector<float> x) {
  for (;;) {
    float total = 0;
    for (float v : x) total += v;
    if (!(total <= 100)) return x;
    for (float& v : x) v *= 2;
  }
}

TEST(WhileLoop, RunsTheBodyUntilThePredicateIsFalse) {
  EXPECT_EQ(doubling(from_vector<float>({1, 2}, {2}))[0].to_vector<float>(), (std::vector<float>{64, 128}));
  EXPECT_EQ(doubling(from_vector<float>({200, 0}, {2}))[0].to_vector<float>(), (std::vector<float>{200, 0}));
}

TEST(WhileLoop, OneCompiledProgramWithoutAGraphBreakRunsEachInputsIterations) {
  for (const Device& device : devices()) {
    auto fast = compile([](const Tensor& x) { return doubling(x)[0]; }, {.fullgraph = true});
    // 6, 0 and 3 iterations.
    for (const std::vector<float>& x : {std::vector<float>{3, 0}, std::vector<float>{200, 0},
                                        std::vector<float>{0.5f, 12}}) {
      const Tensor y = fast(from_vector(x, {2}, device));
      EXPECT_EQ(y.to_vector<float>(), doubled_by_hand(x)) << device.name();
    }
    const CompileStats s = fast.stats();
    EXPECT_EQ(s.compiles, 1) << device.name();
    EXPECT_EQ(s.graph_breaks, 0) << device.name();
  }
}

// A counter and an accumulator carried together; the body reads a traced value from outside (the
// ratio r) and a captured eager tensor (the offset b): acc <- acc * r + b, n times.
TEST(WhileLoop, CarriesSeveralValuesAndReadsValuesFromOutsideTheLoop) {
  for (const Device& device : devices()) {
    const Tensor b = from_vector<float>({1, -1, 0.5f}, {3}, device);
    auto fast = compile(
        [&b](const Tensor& acc0, const Tensor& r, const Tensor& n) {
          const Tensor ratio = r * 0.5;  // computed before the loop, read inside it
          return while_loop(
              [&n](const std::vector<Tensor>& c) { return lt(c[0], n); },
              [&](const std::vector<Tensor>& c) {
                return std::vector<Tensor>{c[0] + 1.0, c[1] * ratio + b};
              },
              {n * 0.0, acc0})[1];
        },
        {.fullgraph = true});
    for (int iterations : {0, 1, 4}) {
      const std::vector<float> acc0 = {1, 2, 3}, r = {2, 4, -2};
      std::vector<float> want = acc0;
      for (int k = 0; k < iterations; ++k)
        for (size_t i = 0; i < 3; ++i) want[i] = want[i] * (r[i] * 0.5f) + b.to_vector<float>()[i];
      const Tensor got = fast(from_vector(acc0, {3}, device), from_vector(r, {3}, device),
                              from_vector<float>({float(iterations)}, {}, device));
      const std::vector<float> values = got.to_vector<float>();
      for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(values[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << device.name();
    }
    EXPECT_EQ(fast.stats().compiles, 1) << device.name();
    EXPECT_EQ(fast.stats().graph_breaks, 0) << device.name();
  }
}

// A changing batch: the loop's carried value has a dynamic dim, so one more compile at most serves
// every size (as for any compiled function).
TEST(WhileLoop, ServesChangingSizesWithoutCompilingPerSize) {
  for (const Device& device : devices()) {
    auto fast = compile([](const Tensor& x) { return doubling(x)[0]; }, {.fullgraph = true});
    for (int64_t n : {2, 3, 5, 8}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(i + 1) * 0.75f;
      EXPECT_EQ(fast(from_vector(x, {n}, device)).to_vector<float>(), doubled_by_hand(x)) << device.name();
    }
    EXPECT_LE(fast.stats().compiles, 2) << device.name();
    EXPECT_EQ(fast.stats().graph_breaks, 0) << device.name();
  }
}

// The debug bundle shows the loop's node (computed by no kernel of its own) and its subgraphs in
// the IR, each op with its line and scope.
TEST(WhileLoop, TheBundleShowsTheSubgraphsWithTheirLinesAndScopes) {
  const std::string dir = ::testing::TempDir() + "while_loop_bundle";
  auto fast = compile([](const Tensor& x) { return doubling(x)[0]; }, {.debug_dir = dir});
  fast(from_vector<float>({1, 2}, {2}));
  const trace::Bundle bundle = fast.bundle();
  bool loop_node = false;
  for (const trace::BundleNode& n : bundle.nodes)
    loop_node = loop_node || (n.op == "while_loop" && n.no_kernel.find("runs its subgraphs") != std::string::npos);
  EXPECT_TRUE(loop_node);
  ASSERT_FALSE(bundle.passes.empty());
  const std::string& ir = bundle.passes.back().ir;
  EXPECT_NE(ir.find("while_loop("), std::string::npos) << ir;
  EXPECT_NE(ir.find("scope=\"while_loop.body\""), std::string::npos) << ir;
  EXPECT_NE(ir.find("scope=\"while_loop.cond\""), std::string::npos) << ir;
  EXPECT_NE(ir.find("control_flow_test.cpp\":"), std::string::npos) << ir;
}

// A loop inside a loop: the inner one's subgraphs are compiled inside the outer body's program.
TEST(WhileLoop, NestedLoopsCompile) {
  auto nested = [](const Tensor& x) {
    return while_loop(
        [](const std::vector<Tensor>& c) { return lt(sum(c[0]), 1000.0); },
        [](const std::vector<Tensor>& c) {
          return while_loop([](const std::vector<Tensor>& d) { return lt(max(d[0]), 10.0); },
                            [](const std::vector<Tensor>& d) { return std::vector<Tensor>{d[0] + 1.0}; },
                            {c[0] * 3.0});
        },
        {x})[0];
  };
  const std::vector<float> x = {1, 2};
  const std::vector<float> eager = nested(from_vector(x, {2})).to_vector<float>();
  std::vector<float> want = x;  // by hand: (1,2) -> (3,6) -> (7,10) -> (21,30) -> ... until the sum passes 1000
  for (;;) {
    if (!(want[0] + want[1] < 1000)) break;
    for (float& v : want) v *= 3;
    while (std::max(want[0], want[1]) < 10)
      for (float& v : want) v += 1;
  }
  EXPECT_EQ(eager, want);
  for (const Device& device : devices()) {
    auto fast = compile(nested, {.fullgraph = true});
    EXPECT_EQ(fast(from_vector(x, {2}, device)).to_vector<float>(), want) << device.name();
    EXPECT_EQ(fast.stats().graph_breaks, 0) << device.name();
  }
}

// A body that reads a tensor's data cannot be traced: the loop runs on the host with graph breaks,
// and fullgraph refuses it, naming the loop's line.
TEST(WhileLoop, ABodyThatReadsDataIsAGraphBreak) {
  auto reading = [](const Tensor& x) {
    return while_loop([](const std::vector<Tensor>& c) { return le(sum(c[0]), 100.0); },
                      [](const std::vector<Tensor>& c) {
                        const float first = c[0].to_vector<float>()[0];
                        return std::vector<Tensor>{c[0] * (first > 0 ? 2.0 : 3.0)};
                      },
                      {x})[0];
  };
  auto fast = compile(reading);
  EXPECT_EQ(fast(from_vector<float>({3, 0}, {2})).to_vector<float>(), (std::vector<float>{192, 0}));
  EXPECT_GE(fast.stats().graph_breaks, 1);
  auto strict = compile(reading, {.fullgraph = true});
  try {
    strict(from_vector<float>({3, 0}, {2}));
    FAIL() << "fullgraph accepted a loop body that reads data";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kiln::while_loop at control_flow_test.cpp:"), std::string::npos) << e.what();
  }
}

// Gradients through a traced loop are not built: the backward names the op and the loop's line.
TEST(WhileLoop, AGradientThroughACompiledLoopIsAnErrorNamingIt) {
  auto fast = compile([](const Tensor& x) { return sum(doubling(x)[0]); });
  const Tensor x = from_vector<float>({1, 2}, {2}).requires_grad_();
  try {
    Tensor loss = fast(x);
    loss.backward();
    FAIL() << "a gradient through a compiled while_loop was computed";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("while_loop"), std::string::npos) << msg;
    EXPECT_NE(msg.find("control_flow_test.cpp:"), std::string::npos) << msg;
  }
}

TEST(WhileLoop, ABodyThatChangesAShapeIsAnErrorNamingTheCallersLine) {
  auto growing = [](const Tensor& x) {
    return while_loop([](const std::vector<Tensor>& c) { return lt(sum(c[0]), 10.0); },
                      [](const std::vector<Tensor>& c) { return std::vector<Tensor>{concat({c[0], c[0]}, 0)}; },
                      {x})[0];
  };
  try {
    compile(growing, {.fullgraph = true})(from_vector<float>({1}, {1}));
    FAIL() << "a growing carried value was compiled";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kiln::while_loop at control_flow_test.cpp:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("took (f32[1]) and returned (f32[2])"), std::string::npos) << msg;
  }
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
