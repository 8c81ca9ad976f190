// A whole training step under kiln::compile: zero_grad, forward, loss, backward and the optimizer
// update trace into one program with no graph break; the parameters, gradients and optimizer
// state are program inputs and its updates are written back after each run. The oracle is the
// same steps run eagerly on identical copies of the model: losses and parameters must agree
// within 1e-5 relative (cpu) or 1e-4 (Vulkan), with the batch size changing (at most two compiles).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <kiln/kiln.h>

#include "core/trace/bundle.h"
#include "frontend/train_steps.h"
#include "runtime/runtime_test_util.h"

namespace kiln {
namespace {

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to_vector<double>(); }

void expect_close(const Tensor& actual, const Tensor& expected, double tol, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  std::vector<double> a = values(actual), e = values(expected);
  ASSERT_EQ(a.size(), e.size()) << what;
  double scale = 0;
  for (double v : e) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::abs(a[i] - e[i]), tol * (scale + std::abs(e[i])) + 1e-7) << what << " element " << i;
}

struct Net {
  Net(Device d) : a(8, 16, true, d, /*seed=*/1), b(16, 4, true, d, 2) {
    for (Tensor* p : parameters()) p->requires_grad_();
  }
  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> out = a.parameters();
    for (Tensor* p : b.parameters()) out.push_back(p);
    return out;
  }
  nn::Linear a, b;
};

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor*>)>;

void check_training(Device device, const MakeOptimizer& make, double tol) {
  Net eager_net(device), compiled_net(device);
  std::unique_ptr<optim::Optimizer> eager_opt = make(eager_net.parameters());
  std::unique_ptr<optim::Optimizer> opt_ptr = make(compiled_net.parameters());
  optim::Optimizer& opt = *opt_ptr;
  // The step as written in the issue: the optimizer reached through a capture, the modules as
  // arguments.
  auto step = compile(
      [&opt](const Tensor& x, const Tensor& y, nn::Linear& a, nn::Linear& b) {
        opt.zero_grad();
        Tensor loss = cross_entropy(b(gelu(a(x))), y);
        loss.backward();
        opt.step();
        return loss;
      },
      {.fullgraph = true});
  const std::vector<int64_t> batches = {4, 4, 6, 6, 5, 4};
  for (size_t s = 0; s < batches.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s) + ", batch " + std::to_string(batches[s]));
    const int64_t n = batches[s];
    Tensor x = randn({n, 8}, device, 100 + s);
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < n; ++i) labels.push_back((i * 3 + int64_t(s)) % 4);
    Tensor y = from_vector(labels, {n}, device);

    eager_opt->zero_grad();
    Tensor eager_loss = cross_entropy(eager_net.b(gelu(eager_net.a(x))), y);
    eager_loss.backward();
    eager_opt->step();

    Tensor loss = step(x, y, compiled_net.a, compiled_net.b);
    expect_close(loss, eager_loss, tol, "loss");
    const std::vector<Tensor*> mine = compiled_net.parameters(), theirs = eager_net.parameters();
    for (size_t k = 0; k < mine.size(); ++k) {
      expect_close(*mine[k], *theirs[k], tol, "parameter " + std::to_string(k));
      expect_close(mine[k]->grad(), theirs[k]->grad(), tol, "gradient of parameter " + std::to_string(k));
    }
  }
  const CompileStats stats = step.stats();
  EXPECT_EQ(stats.graph_breaks, 0);
  EXPECT_EQ(stats.eager_calls, 0);
  EXPECT_LE(stats.compiles, 2) << "the changing batch recompiles once, symbolic";
}

MakeOptimizer sgd_momentum() {
  return [](std::vector<Tensor*> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9}); };
}
MakeOptimizer sgd_dampened_nesterov_free() {
  return [](std::vector<Tensor*> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01});
  };
}
MakeOptimizer adamw() {
  return [](std::vector<Tensor*> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01}); };
}

TEST(CompileTrain, SgdWithMomentumStepsMatchEagerSteps) { check_training(Device::cpu(), sgd_momentum(), 1e-5); }
TEST(CompileTrain, DampenedSgdWithWeightDecayStepsMatchEagerSteps) {
  check_training(Device::cpu(), sgd_dampened_nesterov_free(), 1e-5);
}
TEST(CompileTrain, AdamWStepsMatchEagerSteps) { check_training(Device::cpu(), adamw(), 1e-5); }

TEST(CompileTrain, AdamWStepsMatchEagerStepsOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  check_training(vk, adamw(), 1e-4);
}

// A CNN with batch norm in training mode: the step also writes the running statistics back.
struct Cnn {
  explicit Cnn(Device d)
      : conv(1, 4, 3, /*stride=*/1, /*padding=*/1, 1, 1, true, d, /*seed=*/3), bn(4, 1e-5, 0.1, d),
        fc(4 * 4 * 4, 3, true, d, 4) {}
  Tensor loss(const Tensor& x, const Tensor& y) {
    Tensor h = max_pool2d(relu(bn(conv(x))), 2);
    return cross_entropy(fc(flatten(h, 1)), y);
  }
  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> out = conv.parameters();
    for (nn::Module* m : std::vector<nn::Module*>{&bn, &fc})
      for (Tensor* p : m->parameters()) out.push_back(p);
    return out;
  }
  nn::Conv2d conv;
  nn::BatchNorm2d bn;
  nn::Linear fc;
};

void check_cnn_training(Device device, double tol) {
  Cnn eager_net(device), compiled_net(device);
  optim::SGD eager_opt(eager_net.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD opt(compiled_net.parameters(), {.lr = 0.05, .momentum = 0.9});
  auto step = compiled_step(compiled_net, opt);
  for (int s = 0; s < 4; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Tensor x = randn({4, 1, 8, 8}, device, uint64_t(40 + s));
    Tensor y = from_vector(std::vector<int64_t>{0, 1, 2, int64_t(s % 3)}, {4}, device);
    Tensor eager_loss = eager_step(eager_net, eager_opt, x, y);
    expect_close(step(x, y), eager_loss, tol, "loss");
    const std::vector<Tensor*> mine = compiled_net.parameters(), theirs = eager_net.parameters();
    for (size_t k = 0; k < mine.size(); ++k) expect_close(*mine[k], *theirs[k], tol, "parameter " + std::to_string(k));
    expect_close(compiled_net.bn.running_mean, eager_net.bn.running_mean, tol, "running_mean");
    expect_close(compiled_net.bn.running_var, eager_net.bn.running_var, tol, "running_var");
  }
  EXPECT_EQ(step.stats().compiles, 1);
}

TEST(CompileTrain, CnnWithBatchNormInTrainingModeMatchesEagerSteps) { check_cnn_training(Device::cpu(), 1e-5); }

TEST(CompileTrain, CnnWithBatchNormInTrainingModeMatchesEagerStepsOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  check_cnn_training(vk, 1e-4);
}

// A GPT-style block: layer norm, causal softmax attention, GELU MLP, residuals; AdamW.
struct Block {
  explicit Block(Device d)
      : ln1({16}, 1e-5, d), attn(16, 4, true, /*batch_first=*/true, d, /*seed=*/5), ln2({16}, 1e-5, d),
        fc1(16, 32, true, d, 6), fc2(32, 16, true, d, 7) {}
  Tensor loss(const Tensor& x, const Tensor& target) {
    const int64_t t = x.sizes()[1];
    std::vector<uint8_t> future;  // true where a query may not attend: the keys after it
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) future.push_back(j > i);
    Tensor mask = cast(from_vector(future, {t, t}, x.device()), DType::Bool);
    Tensor h = ln1(x);
    Tensor y = x + attn(h, h, h, mask);
    y = y + fc2(gelu(fc1(ln2(y))));
    return mse_loss(y, target);
  }
  std::vector<Tensor*> parameters() {
    std::vector<Tensor*> out;
    for (nn::Module* m : std::vector<nn::Module*>{&ln1, &attn, &ln2, &fc1, &fc2})
      for (Tensor* p : m->parameters()) out.push_back(p);
    return out;
  }
  nn::LayerNorm ln1;
  nn::MultiheadAttention attn;
  nn::LayerNorm ln2;
  nn::Linear fc1, fc2;
};

void check_block_training(Device device, double tol) {
  Block eager_net(device), compiled_net(device);
  // The attention's key bias has a zero gradient (softmax ignores a constant added to a row of
  // scores), so what backward computes there is rounding noise, which Adam's default eps (1e-8)
  // would turn into steps of +-lr that differ with the order of operations (on cpu the eager
  // backward runs node by node, the compiled one fused: gradients ~3e-9 apart). eps = 1e-3 keeps
  // the steps' difference near lr * 3e-9 / eps = 3e-8 and leaves the real gradients' steps
  // normalized.
  optim::AdamW eager_opt(eager_net.parameters(), {.lr = 0.01, .eps = 1e-3});
  optim::AdamW opt(compiled_net.parameters(), {.lr = 0.01, .eps = 1e-3});
  auto step = compiled_step(compiled_net, opt);
  for (int s = 0; s < 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const int64_t batch = s == 2 ? 3 : 2;  // the batch changes: one recompile
    Tensor x = randn({batch, 6, 16}, device, uint64_t(60 + s));
    Tensor target = randn({batch, 6, 16}, device, uint64_t(70 + s));
    Tensor eager_loss = eager_step(eager_net, eager_opt, x, target);
    expect_close(step(x, target), eager_loss, tol, "loss");
    const std::vector<Tensor*> mine = compiled_net.parameters(), theirs = eager_net.parameters();
    for (size_t k = 0; k < mine.size(); ++k) expect_close(*mine[k], *theirs[k], tol, "parameter " + std::to_string(k));
  }
  EXPECT_LE(step.stats().compiles, 2);
  // AdamW's update of all 12 parameters (24 kernels unfused: one of scalars and one update per
  // parameter) runs in a few launches of its own: at most 4 on cpu. lavapipe binds at most 32
  // storage buffers per kernel, and the updates write 36 values and their scalars 48, so 4 is its
  // floor; the packing reaches 5 there.
  int update_launches = 0;
  for (const trace::BundleKernel& k : step.bundle().kernels) update_launches += k.phase == "optimizer";
  EXPECT_GE(update_launches, 1);
  EXPECT_LE(update_launches, device.backend().caps().is_cpu && device != Device::cpu() ? 5 : 4);
}

TEST(CompileTrain, GptBlockWithCausalAttentionMatchesEagerSteps) { check_block_training(Device::cpu(), 1e-5); }

TEST(CompileTrain, GptBlockWithCausalAttentionMatchesEagerStepsOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  check_block_training(vk, 1e-4);
}

// A step with a graph break (a host read of the loss) runs in lazy mode: the ops that autograd
// records run eagerly, the optimizer's update is recorded lazily and flushed as it is assigned;
// the parameters follow the eager steps.
TEST(CompileTrain, AStepWithAGraphBreakStillMatchesEagerSteps) {
  Net eager_net(Device::cpu()), compiled_net(Device::cpu());
  optim::SGD eager_opt(eager_net.parameters(), {.lr = 0.1, .momentum = 0.5});
  optim::SGD opt(compiled_net.parameters(), {.lr = 0.1, .momentum = 0.5});
  auto body = [](optim::SGD& o, const Tensor& x, nn::Linear& a, nn::Linear& b) {
    o.zero_grad();
    Tensor loss = mean(b(gelu(a(x))) * b(gelu(a(x))));
    const double scale = loss.item<double>() > 1e3 ? 0.5 : 1.0;  // the break
    (loss * scale).backward();
    o.step();
    return loss;
  };
  auto step = compile([&opt, &body](const Tensor& x, nn::Linear& a, nn::Linear& b) { return body(opt, x, a, b); });
  for (int s = 0; s < 3; ++s) {
    Tensor x = randn({3, 8}, Device::cpu(), uint64_t(7 + s));
    body(eager_opt, x, eager_net.a, eager_net.b);
    step(x, compiled_net.a, compiled_net.b);
    const std::vector<Tensor*> mine = compiled_net.parameters(), theirs = eager_net.parameters();
    for (size_t k = 0; k < mine.size(); ++k) expect_close(*mine[k], *theirs[k], 1e-5, "parameter " + std::to_string(k));
  }
  EXPECT_EQ(step.stats().graph_breaks, 1);
}

// The step's bundle (what kiln-debug opens) says which kernels are forward, backward (gradient
// nodes, "gradient of linear at ...") and optimizer (the update, scope optim.SGD).
TEST(CompileTrain, TheBundleMarksEachKernelsPhase) {
  KILN_REQUIRE_VULKAN(vk);
  Net net(vk);
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto step = compile(
      [&opt](const Tensor& x, nn::Linear& a, nn::Linear& b) {
        opt.zero_grad();
        Tensor loss = mean(b(gelu(a(x))));
        loss.backward();
        opt.step();
        return loss;
      },
      {.fullgraph = true});
  step(randn({4, 8}, vk, 1), net.a, net.b);
  std::set<std::string> phases;
  for (const trace::BundleKernel& k : step.bundle().kernels) {
    EXPECT_FALSE(k.phase.empty()) << k.name;
    for (size_t start = 0; start <= k.phase.size();) {
      size_t end = std::min(k.phase.find('+', start), k.phase.size());
      phases.insert(k.phase.substr(start, end - start));
      start = end + 1;
    }
  }
  EXPECT_EQ(phases, (std::set<std::string>{"forward", "backward", "optimizer"}));
}

// A gradient left by an eager backward before the first call is added to, and the optimizer in the
// step reads the sum, as eagerly.
TEST(CompileTrain, AGradientFromBeforeTheCallIsAddedToAndStepped) {
  Net eager_net(Device::cpu()), compiled_net(Device::cpu());
  optim::SGD eager_opt(eager_net.parameters(), {.lr = 0.1}), opt(compiled_net.parameters(), {.lr = 0.1});
  auto step = compile(
      [&opt](const Tensor& x, nn::Linear& a, nn::Linear& b) {
        Tensor loss = sum(b(a(x)));
        loss.backward();
        opt.step();
        return loss;
      },
      {.fullgraph = true});
  Tensor x0 = randn({2, 8}, Device::cpu(), 3), x1 = randn({2, 8}, Device::cpu(), 4);
  sum(compiled_net.b(compiled_net.a(x0))).backward();  // an eager backward leaves gradients behind
  sum(eager_net.b(eager_net.a(x0))).backward();
  step(x1, compiled_net.a, compiled_net.b);
  sum(eager_net.b(eager_net.a(x1))).backward();
  eager_opt.step();
  std::vector<Tensor*> want = eager_net.parameters(), got = compiled_net.parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    expect_close(got[i]->grad(), want[i]->grad(), 1e-5, "grad " + std::to_string(i));
    expect_close(*got[i], *want[i], 1e-5, "parameter " + std::to_string(i));
  }
}

// The step writes each updated parameter over the buffer it had (donated: only the parameter held
// it), so the step holds one copy of the parameters. Where another tensor shares the buffer, the
// update goes to a new one and that tensor keeps the old values. With reduce_overhead the recording
// binds the parameters' buffers directly. The oracle is the eager step.
void check_updates_in_place(Device device, Mode mode, double tol) {
  Net eager_net(device), compiled_net(device);
  optim::SGD eager_opt(eager_net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD opt(compiled_net.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto step = compile(
      [&opt](const Tensor& x, nn::Linear& a, nn::Linear& b) {
        opt.zero_grad();
        Tensor loss = sum(gelu(b(a(x))));
        loss.backward();
        opt.step();
        return loss;
      },
      {.mode = mode, .fullgraph = true});
  Tensor& weight = *compiled_net.parameters()[0];
  Tensor kept_grad;
  std::vector<float> kept_values;
  for (int s = 0; s < 6; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Tensor x = randn({s == 5 ? 5 : 3, 8}, device, 20 + uint64_t(s));  // the last step, another batch
    const Buffer* before = weight.impl().buffer.get();
    std::optional<DeviceTensor> shared;  // steps 2 and 3: another holder of the weight's buffer
    if (s == 2 || s == 3) shared = DeviceTensor(weight.impl());
    const std::vector<float> old_values = weight.to_vector<float>();
    step(x, compiled_net.a, compiled_net.b);
    eager_opt.zero_grad();
    sum(gelu(eager_net.b(eager_net.a(x)))).backward();
    eager_opt.step();
    std::vector<Tensor*> want = eager_net.parameters(), got = compiled_net.parameters();
    for (size_t i = 0; i < want.size(); ++i) {
      expect_close(*got[i], *want[i], tol, "parameter " + std::to_string(i));
      expect_close(got[i]->grad(), want[i]->grad(), tol, "gradient " + std::to_string(i));
    }
    // A gradient held past its step keeps its values (reduce_overhead lends the program's buffer
    // to the gradient, and takes it back only when nothing else holds it).
    if (s == 3) {
      kept_grad = weight.grad();
      kept_values = kept_grad.to_vector<float>();
    }
    if (s == 4) EXPECT_EQ(kept_grad.to_vector<float>(), kept_values);
    if (s == 1 || s >= 4) EXPECT_EQ(weight.impl().buffer.get(), before);  // momentum exists from step 0 on
    if (shared) {
      EXPECT_NE(weight.impl().buffer.get(), before);
      EXPECT_EQ(shared->to_host<float>(), old_values);
    }
  }
}

TEST(CompileTrain, UpdatesGoIntoTheParametersBuffersUnlessAnotherTensorSharesThem) {
  check_updates_in_place(Device::cpu(), Mode::Default, 1e-5);
  check_updates_in_place(Device::cpu(), Mode::ReduceOverhead, 1e-5);
}

TEST(CompileTrain, UpdatesGoIntoTheParametersBuffersOnVulkan) {
  KILN_REQUIRE_VULKAN(device);
  check_updates_in_place(device, Mode::Default, 1e-4);
  check_updates_in_place(device, Mode::ReduceOverhead, 1e-4);
}

// Without zero_grad in the step, backward adds to what the last call left, as it does eagerly
// (gradient accumulation over micro-batches).
TEST(CompileTrain, GradientsAccumulateAcrossCallsAsEagerly) {
  Net eager_net(Device::cpu()), compiled_net(Device::cpu());
  auto step = compile([](const Tensor& x, nn::Linear& a, nn::Linear& b) {
    Tensor loss = sum(b(a(x)));
    loss.backward();
    return loss;
  });
  for (int call = 0; call < 3; ++call) {
    Tensor x = randn({2, 8}, Device::cpu(), 10 + call);
    step(x, compiled_net.a, compiled_net.b);
    sum(eager_net.b(eager_net.a(x))).backward();
    std::vector<Tensor*> want = eager_net.parameters(), got = compiled_net.parameters();
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(got[i]->grad(), want[i]->grad(), 1e-5,
                   "call " + std::to_string(call) + " grad " + std::to_string(i));
  }
  // The first call started from no gradient, the second from one: two graphs, then replays.
  ASSERT_EQ(step.stats().compiles, 2);
  const std::string reason = step.stats().recompile_reasons.at(0);
  EXPECT_NE(reason.find("the gradient of arg 1 (module) 'weight' was undefined when compiled, now defined"),
            std::string::npos)
      << reason;
  EXPECT_EQ(step.stats().cache_hits, 1);
}

}  // namespace
}  // namespace kiln
