// kiln::compile: compiled results equal eager ones (the oracle: the same function run eagerly on
// cpu), cache hits skip the function, and every guard (sizes, dtype, scalars, shape decisions,
// replaced weights) recompiles with a reason naming what changed and where.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "core/trace/bundle.h"

namespace kiln {
namespace {

// Recompile reasons are logged at info; turn that on unless the runner asked for debug.
const bool kInfoLogging = [] {
  const char* level = std::getenv("KILN_LOG");
  if (!level || std::string(level) != "debug") setenv("KILN_LOG", "info", 1);
  return true;
}();

// Compiled vs eager on the same device runs the same reference kernels in the same order.
constexpr double kTol = 1e-6;

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to_vector<double>(); }

::testing::AssertionResult close(const Tensor& actual, const Tensor& expected, double tol) {
  if (actual.type().str() != expected.type().str())
    return ::testing::AssertionFailure()
           << "type " << actual.type().str() << " vs " << expected.type().str();
  std::vector<double> a = values(actual), e = values(expected);
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - e[i]) > tol * (1 + std::abs(e[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i];
  return ::testing::AssertionSuccess();
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no kiln::Error thrown>";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Mlp : nn::Module {
  explicit Mlp(Device device = Device::cpu())
      : fc1(4, 8, true, device, 11), fc2(8, 3, true, device, 12) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  std::string type_name() const override { return "Mlp"; }
  Tensor forward(const Tensor& x) {
    ScopeGuard guard = scope();
    return fc2(relu(fc1(x)));
  }
  nn::Linear fc1, fc2;
};

Tensor mlp_fn(const Tensor& x, Mlp& mlp) { return mlp.forward(x); }

Tensor input(int64_t batch, uint64_t seed = 7, Device device = Device::cpu()) {
  return randn({batch, 4}, device, seed);
}

TEST(Compile, MlpAndPointwiseMatchEagerOnCpu) {
  Mlp mlp;
  auto fast = compile(mlp_fn);
  Tensor x = input(5);
  EXPECT_TRUE(close(fast(x, mlp), mlp_fn(x, mlp), kTol));

  auto pointwise = [](const Tensor& a, Tensor b) -> std::vector<Tensor> {
    Tensor y = tanh(a * b + 1.0) - a / 2.0;
    return {y, sigmoid(y) * b};
  };
  auto fast_pointwise = compile(pointwise);
  Tensor a = randn({3, 5}, Device::cpu(), 1), b = randn({3, 5}, Device::cpu(), 2);
  std::vector<Tensor> got = fast_pointwise(a, b), want = pointwise(a, b);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(close(got[0], want[0], kTol));
  EXPECT_TRUE(close(got[1], want[1], kTol));
  EXPECT_EQ(fast_pointwise.stats().compiles, 1);
}

TEST(Compile, CacheHitReplaysWithoutCallingTheFunction) {
  // Inference: the parameters require grad, and with grad mode on a call is differentiable, which
  // traces the function once more per input sizes for its backward (compile_autograd_test.cpp).
  NoGradGuard no_grad;
  Mlp mlp;
  int calls = 0;
  auto fast = compile([&calls](const Tensor& x, Mlp& m) {
    ++calls;
    return m.forward(x);
  });
  for (uint64_t seed = 0; seed < 5; ++seed) {
    Tensor x = input(6, seed);
    EXPECT_TRUE(close(fast(x, mlp), mlp_fn(x, mlp), kTol));
  }
  EXPECT_EQ(calls, 1);
  CompileStats s = fast.stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.recompiles, 0);
  EXPECT_EQ(s.cache_hits, 4);
  EXPECT_EQ(s.cache_entries, 1);
  EXPECT_GT(s.program.kernels, 0);
}

TEST(Compile, AutoDynamicRecompilesOnceThenTheBatchIsSymbolic) {
  // Inference: the parameters require grad, and with grad mode on a call is differentiable, which
  // traces the function once more per input sizes for its backward (compile_autograd_test.cpp).
  NoGradGuard no_grad;
  Mlp mlp;
  int calls = 0;
  auto fast = compile([&calls](const Tensor& x, Mlp& m) {
    ++calls;
    return m.forward(x);
  });
  for (int64_t batch : {2, 3, 5, 8, 16, 7, 2}) {
    Tensor x = input(batch, uint64_t(batch));
    EXPECT_TRUE(close(fast(x, mlp), mlp_fn(x, mlp), kTol)) << "batch " << batch;
  }
  CompileStats s = fast.stats();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(s.compiles, 2);
  ASSERT_EQ(s.recompiles, 1);
  EXPECT_TRUE(contains(s.recompile_reasons[0], "arg 0 dim 0: size was 2, now 3"))
      << s.recompile_reasons[0];
  EXPECT_TRUE(contains(s.recompile_reasons[0], "arg 0 dim 0 now symbolic"))
      << s.recompile_reasons[0];
}

TEST(Compile, StaticRecompilesForEveryBatchWithTheReason) {
  Mlp mlp;
  auto fast = compile(mlp_fn, {.dynamic = Dynamic::Static});
  for (int64_t batch : {2, 3, 4, 2}) {
    Tensor x = input(batch);
    EXPECT_TRUE(close(fast(x, mlp), mlp_fn(x, mlp), kTol));
  }
  CompileStats s = fast.stats();
  EXPECT_EQ(s.compiles, 3);
  ASSERT_EQ(s.recompile_reasons.size(), 2u);
  EXPECT_EQ(s.recompile_reasons[0], "arg 0 dim 0: size was 2, now 3 (shape [2,4] -> [3,4])");
  EXPECT_EQ(s.recompile_reasons[1], "arg 0 dim 0: size was 3, now 4 (shape [3,4] -> [4,4])");
  EXPECT_EQ(s.cache_hits, 1);  // batch 2 again
}

// A module whose forward makes a shape decision, so the guard has a scope and a line.
struct Gate : nn::Module {
  Gate() { set_name("gate"); }
  int decision_line = 0;
  Tensor forward(const Tensor& x) {
    ScopeGuard guard = scope();
    Tensor y = x * 2.0;
    decision_line = __LINE__ + 1;
    if (x.shape(0) > 10) y = y + 1.0;
    return y;
  }
};

TEST(Compile, ShapeDecisionRecompilesWithTheLineAndScopeWhenItFlips) {
  Gate gate;
  int calls = 0;
  auto fn = [&calls](const Tensor& x, Gate& g) {
    ++calls;
    return g.forward(x);
  };
  auto fast = compile(fn, {.dynamic = Dynamic::Symbolic});
  auto check = [&](int64_t batch) {
    Tensor x = input(batch);
    EXPECT_TRUE(close(fast(x, gate), gate.forward(x), kTol)) << "batch " << batch;
  };
  check(4);
  check(8);  // same side of 10: replay
  EXPECT_EQ(fast.stats().compiles, 1);
  ::testing::internal::CaptureStderr();
  check(12);  // crosses 10: the decision flips
  std::string log = ::testing::internal::GetCapturedStderr();
  check(20);
  check(3);
  CompileStats s = fast.stats();
  EXPECT_EQ(s.compiles, 2);
  ASSERT_EQ(s.recompile_reasons.size(), 1u);
  std::string where = "compile_test.cpp:" + std::to_string(gate.decision_line);
  EXPECT_EQ(s.recompile_reasons[0],
            "shape decision s0 > 10 at " + where + " [gate] was false, now true (s0=12)");
  EXPECT_TRUE(contains(log, "recompiling")) << log;
  EXPECT_TRUE(contains(log, where)) << log;
  EXPECT_EQ(calls, 2);  // the reference calls gate.forward directly, not fn
}

TEST(Compile, DtypeChangeRecompiles) {
  auto fn = [](const Tensor& x) { return exp(x) * 3.0 - x; };
  auto fast = compile(fn);
  Tensor x32 = randn({4, 4}, Device::cpu(), 3);
  Tensor x64 = x32.to(DType::F64);
  EXPECT_TRUE(close(fast(x32), fn(x32), kTol));
  EXPECT_TRUE(close(fast(x64), fn(x64), kTol));
  CompileStats s = fast.stats();
  ASSERT_EQ(s.recompile_reasons.size(), 1u);
  EXPECT_EQ(s.recompile_reasons[0], "arg 0: dtype was f32, now f64");
}

TEST(Compile, ScalarArgumentsAreGuardedByValue) {
  int calls = 0;
  auto fn = [&calls](const Tensor& x, float scale, int shift, bool negate) {
    ++calls;
    Tensor y = x * double(scale) + double(shift);
    return negate ? -y : y;
  };
  auto fast = compile(fn);
  Tensor x = randn({2, 3}, Device::cpu(), 4);
  EXPECT_TRUE(close(fast(x, 2.0f, 1, false), x * 2.0 + 1.0, kTol));
  EXPECT_TRUE(close(fast(x, 2.0f, 1, false), x * 2.0 + 1.0, kTol));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(close(fast(x, 0.5f, 1, false), x * 0.5 + 1.0, kTol));
  EXPECT_TRUE(close(fast(x, 0.5f, 1, true), -(x * 0.5 + 1.0), kTol));
  EXPECT_TRUE(close(fast(x, 2.0f, 1, false), x * 2.0 + 1.0, kTol));  // first entry again
  CompileStats s = fast.stats();
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(s.recompile_reasons.size(), 2u);
  EXPECT_EQ(s.recompile_reasons[0], "arg 1 (scalar): value was 2, now 0.5");
  EXPECT_EQ(s.recompile_reasons[1], "arg 3 (scalar): value was false, now true");
}

TEST(Compile, RecompileLimitErrorNamesTheFunctionAndLastReason) {
  auto fn = [](const Tensor& x) { return x + 1.0; };
  int line = __LINE__ + 1;
  auto fast = compile(fn, {.dynamic = Dynamic::Static, .recompile_limit = 2});
  fast(randn({2}, Device::cpu(), 1));
  fast(randn({3}, Device::cpu(), 1));
  std::string message = error_of([&] { fast(randn({4}, Device::cpu(), 1)); });
  EXPECT_TRUE(contains(message, "function compiled at compile_test.cpp:" + std::to_string(line)))
      << message;
  EXPECT_TRUE(contains(message, "recompile_limit (2")) << message;
  EXPECT_TRUE(contains(message, "arg 0 dim 0: size was 3, now 4")) << message;
  // Cached entries still replay.
  Tensor x = randn({2}, Device::cpu(), 5);
  EXPECT_TRUE(close(fast(x), x + 1.0, kTol));
}

TEST(Compile, RecompileLimitEagerWarnsOnceAndStaysCorrect) {
  int calls = 0;
  auto fn = [&calls](const Tensor& x) {
    ++calls;
    return relu(x) * 2.0;
  };
  auto fast = compile(fn, {.dynamic = Dynamic::Static,
                           .recompile_limit = 1,
                           .on_limit = OnLimit::Eager,
                           .name = "doubler"});
  Tensor a = randn({2, 2}, Device::cpu(), 1), b = randn({3, 2}, Device::cpu(), 2),
         c = randn({4, 2}, Device::cpu(), 3);
  EXPECT_TRUE(close(fast(a), relu(a) * 2.0, kTol));
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(close(fast(b), relu(b) * 2.0, kTol));
  EXPECT_TRUE(close(fast(c), relu(c) * 2.0, kTol));
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(close(fast(a), relu(a) * 2.0, kTol));  // the cached entry still replays
  EXPECT_TRUE(contains(log, "doubler hit recompile_limit (1")) << log;
  EXPECT_TRUE(contains(log, "run eagerly")) << log;
  EXPECT_EQ(log.find("recompile_limit"), log.rfind("recompile_limit")) << "warned twice: " << log;
  CompileStats s = fast.stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.eager_calls, 2);
  EXPECT_EQ(calls, 3);  // one trace, two eager runs
}

TEST(Compile, FullgraphBreakIsAnErrorNamingItsLine) {
  int line = 0;
  auto fn = [&line](const Tensor& x) {
    line = __LINE__ + 1;
    float total = sum(x).item<float>();
    return x * double(total);
  };
  auto fast = compile(fn, {.fullgraph = true});
  std::string message = error_of([&] { fast(randn({3}, Device::cpu(), 1)); });
  EXPECT_TRUE(contains(message, "graph break at compile_test.cpp:" + std::to_string(line) + ":"))
      << message;
  EXPECT_TRUE(contains(message, "fullgraph")) << message;
}

TEST(Compile, GraphBreakWithoutFullgraphRunsInLazyModeAndIsCounted) {
  int calls = 0, line = 0;
  auto fn = [&](const Tensor& x) {
    ++calls;
    line = __LINE__ + 1;
    std::vector<float> v = x.to_vector<float>();
    return x * double(v[0]);
  };
  auto fast = compile(fn);
  Tensor x = randn({3}, Device::cpu(), 1), y = randn({3}, Device::cpu(), 2);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(close(fast(x), x * double(x.to_vector<float>()[0]), kTol));
  EXPECT_TRUE(close(fast(y), y * double(y.to_vector<float>()[0]), kTol));
  std::string log = ::testing::internal::GetCapturedStderr();
  std::string where = "compile_test.cpp:" + std::to_string(line);
  EXPECT_TRUE(contains(log, "graph break at " + where)) << log;
  EXPECT_TRUE(contains(log, "lazy mode")) << log;
  CompileStats s = fast.stats();
  EXPECT_EQ(s.graph_breaks, 1);
  ASSERT_EQ(s.graph_break_locations.size(), 1u);
  EXPECT_EQ(s.graph_break_locations[0], where);
  EXPECT_EQ(s.eager_calls, 0);
  EXPECT_EQ(s.lazy_calls, 2);
  EXPECT_EQ(calls, 3);  // the broken trace, then one lazy run per call; no retrace
  // The multiply after the read is one segment, compiled at the first call and replayed after.
  EXPECT_EQ(s.segments_compiled, 1);
  EXPECT_EQ(s.segment_runs, 2);
}

// A data-dependent branch: the segment before the break and each branch's segment are compiled
// once and replayed; results match the same function run eagerly on the cpu reference.
void check_lazy_branches(Device device, double tol) {
  int calls = 0;
  auto fn = [&](const Tensor& x) {
    ++calls;
    Tensor y = relu(x) * 2.0 + 1.0;
    if (sum(y).item<float>() > 40.0f) return exp(y * 0.1) - 1.0;
    return y * y + x;
  };
  auto fast = compile(fn, {.name = "branchy"});
  Tensor small = rand({4, 8}, Device::cpu(), 1) * 0.1;  // sum(y) = 32 + ... < 40
  Tensor large = rand({4, 8}, Device::cpu(), 2) + 1.0;  // sum(y) > 96
  for (int round = 0; round < 2; ++round)
    for (const Tensor& x : {small, large}) {
      Tensor got = fast(x.to(device));
      EXPECT_EQ(got.device(), device);
      EXPECT_TRUE(close(got, fn(x), tol)) << "round " << round;
    }
  CompileStats s = fast.stats();
  EXPECT_EQ(s.graph_breaks, 1);
  EXPECT_EQ(s.lazy_calls, 4);
  EXPECT_EQ(s.segments_compiled, 3);  // before the break, then one per branch
  EXPECT_EQ(s.segment_runs, 8);
  EXPECT_EQ(calls, 1 + 4 + 4);  // the broken trace, 4 lazy runs, 4 eager oracle runs
}

TEST(Compile, LazySegmentsAreCompiledOncePerBranchOnCpu) {
  check_lazy_branches(Device::cpu(), kTol);
}

TEST(Compile, LazySegmentsAreCompiledOncePerBranchOnVulkan) {
  Device vulkan;
  try {
    vulkan = Device::parse("vulkan");
  } catch (const Error& e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  check_lazy_branches(vulkan, 1e-5);
}

TEST(Compile, MaxAutotuneMatchesEager) {
  Mlp mlp;
  auto fast = compile(mlp_fn, {.mode = Mode::MaxAutotune});
  Tensor x = randn({5, 4}, Device::cpu(), 5);
  EXPECT_TRUE(close(fast(x, mlp), mlp_fn(x, mlp), kTol));
}

TEST(Compile, ReduceOverheadMatchesEager) {
  Mlp mlp;
  auto fast = compile(mlp_fn, {.mode = Mode::ReduceOverhead});
  for (int i = 0; i < 3; ++i) {
    Tensor x = input(4, uint64_t(i));
    EXPECT_TRUE(close(fast(x, mlp), mlp_fn(x, mlp), kTol));
  }
  EXPECT_EQ(fast.stats().compiles, 1);
}

std::map<std::string, Tensor> other_weights(Mlp& mlp) {
  std::map<std::string, Tensor> state;
  uint64_t seed = 100;
  for (auto& [name, t] : mlp.named_tensors()) state[name] = randn(t->sizes(), Device::cpu(), seed++);
  return state;
}

TEST(Compile, ModuleArgumentWeightsAreReReadAfterLoadStateDict) {
  Mlp mlp;
  auto fast = compile(mlp_fn);
  Tensor x = input(3);
  Tensor before = fast(x, mlp);
  mlp.load_state_dict(other_weights(mlp));
  Tensor after = fast(x, mlp);
  EXPECT_TRUE(close(after, mlp_fn(x, mlp), kTol));
  EXPECT_FALSE(close(after, before, kTol));
  EXPECT_EQ(fast.stats().compiles, 1);  // parameters are program inputs: no retrace needed
}

TEST(Compile, LambdaCapturedModuleRetracesWhenItsWeightsAreReplaced) {
  Mlp mlp;
  auto fast = compile([&mlp](const Tensor& x) { return mlp.forward(x); });
  Tensor x = input(3);
  fast(x);
  fast(x);
  mlp.load_state_dict(other_weights(mlp));
  EXPECT_TRUE(close(fast(x), mlp_fn(x, mlp), kTol));
  CompileStats s = fast.stats();
  ASSERT_EQ(s.recompile_reasons.size(), 1u);
  EXPECT_TRUE(contains(s.recompile_reasons[0], "was replaced or released by its owner"))
      << s.recompile_reasons[0];
  EXPECT_TRUE(contains(s.recompile_reasons[0], "[fc1]")) << s.recompile_reasons[0];
}

TEST(Compile, TensorsOnDifferentDevicesAreAnError) {
  auto fn = [](const Tensor& a, const Tensor& b) { return a + b; };
  auto fast = compile(fn);
  Tensor a = randn({2}, Device::cpu(), 1);
  Tensor b = zeros({2}, Device::parse("null"));
  std::string message = error_of([&] { fast(a, b); });
  EXPECT_TRUE(contains(message, "different devices (arg 0 on cpu, arg 1 on null")) << message;
}

TEST(Compile, SymbolicTraceThatNeedsStaticSizesFallsBackToStatic) {
  // sizes() needs static dims, so the symbolic trace fails and the compile specializes instead.
  auto fn = [](const Tensor& x) { return reshape(x * 3.0, Dims(x.sizes())); };
  auto fast = compile(fn, {.dynamic = Dynamic::Symbolic});
  Tensor x = randn({3, 5}, Device::cpu(), 1);
  EXPECT_TRUE(close(fast(x), x * 3.0, kTol));
  EXPECT_EQ(fast.stats().compiles, 1);
}

TEST(Compile, CompiledFunctionCalledWhileTracingIsInlined) {
  int inner_calls = 0;
  auto inner = compile([&](const Tensor& x) {
    ++inner_calls;
    return sigmoid(x);
  });
  auto outer = compile([&](const Tensor& x) { return inner(x) * 2.0; });
  Tensor x = randn({4}, Device::cpu(), 1);
  EXPECT_TRUE(close(outer(x), sigmoid(x) * 2.0, kTol));
  EXPECT_TRUE(close(outer(x), sigmoid(x) * 2.0, kTol));
  EXPECT_EQ(inner_calls, 1);  // traced through once, as part of outer's graph
  EXPECT_EQ(inner.stats().calls, 0);
}

TEST(Compile, DebugDirReceivesABundleForTheDebugger) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "kiln_compile_test_debug";
  std::filesystem::remove_all(dir);
  auto fn = [](const Tensor& x) { return relu(x) + 1.0; };
  auto fast = compile(fn, {.debug_dir = dir.string()});
  fast(randn({2, 2}, Device::cpu(), 1));
  std::vector<std::filesystem::path> bundles;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (std::filesystem::exists(e.path() / "bundle.json")) bundles.push_back(e.path());
  ASSERT_EQ(bundles.size(), 1u);
  trace::Bundle b = trace::read_bundle(bundles[0].string());
  EXPECT_FALSE(b.passes.empty());
  bool has_relu = false;
  for (const trace::BundleNode& n : b.nodes) {
    has_relu |= n.op == "relu";
    if (n.op != "constant") EXPECT_GE(b.kernel_of(n.id), 0) << n.op;
  }
  EXPECT_TRUE(has_relu);
  std::filesystem::remove_all(dir);
}

TEST(Compile, CompiledOnVulkanMatchesCpu) {
  Device vulkan;
  try {
    vulkan = Device::parse("vulkan");
  } catch (const Error& e) {
    GTEST_SKIP() << "no Vulkan device: " << e.what();
  }
  Mlp cpu_mlp, gpu_mlp(vulkan);  // same seeds: the same weights on every device
  auto fast = compile(mlp_fn);
  for (int64_t batch : {4, 6, 9}) {
    Tensor x = input(batch, uint64_t(batch));
    Tensor got = fast(x.to(vulkan), gpu_mlp);
    EXPECT_EQ(got.device(), vulkan);
    EXPECT_TRUE(close(got, mlp_fn(x, cpu_mlp), 1e-5)) << "batch " << batch;
  }
  EXPECT_EQ(fast.stats().compiles, 2);  // the batch became symbolic after one change
}

}  // namespace
}  // namespace kiln
