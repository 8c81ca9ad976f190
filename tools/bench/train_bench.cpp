// kiln-bench-train: one training step (zero_grad, forward, loss, backward, SGD step) for the
// samples' MLP, seed CNN, transformer block and ResNet-18 (--models resnet18, not in the default
// list: seconds per step on a CPU), per device, run eagerly and as one program under
// kiln::compile: the median milliseconds of --reps steps after --warmup steps (the first builds
// and caches the programs), and the first step's time. PyTorch's eager step of the same models and
// batches is tools/bench/peers/train_peers.py; BENCHMARKS.md puts them side by side. The compiled
// step's launches are counted from its bundle: in all, and those running only the optimizer's update
// (an update fused into a gradient kernel's epilogue adds no launch). Peak memory is the device's
// MemoryStats over the timed steps: the model, its gradients and optimizer state, the batch, and
// what the step allocates (eager: each op's output; compiled: the program's arenas and outputs);
// "+MB" is what the steps allocated beyond what stays held between them. --compile forward
// compiles the model's forward alone instead (--memory-budget: what its backward saves).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "samples/common/sample_models.h"
#include "tools/bench/bench_util.h"


namespace kiln {
namespace {

using bench::median;
using bench::wait_for;

using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<std::string> devices{"cpu", "vulkan"};
  std::vector<std::string> models{"mlp", "cnn", "transformer"};
  int reps = 10;
  int warmup = 2;
  // "step": the whole step under kiln::compile; "forward": the model's forward compiled alone, its
  // loss, backward and update eager (the backward runs the compiled forward's gradient program).
  std::string compile = "step";
  double memory_budget = 0;  // CompileOptions::memory_budget, for --compile forward
  Mode mode = Mode::Default;  // --mode reduce-overhead: record the compiled launches and replay them
};

// A model with its batch and loss.
struct TrainCase {
  std::string shape;  // what the batch is, for the table
  std::function<std::vector<Tensor*>()> parameters;
  std::function<Tensor(const Tensor& x)> forward;
  std::function<Tensor(const Tensor& out, const Tensor& y)> criterion;
  Tensor x, y;
  std::shared_ptr<void> keep;  // the model
};

Tensor labels(int64_t batch, int64_t classes, Device device) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < batch; ++i) v.push_back((i * 7 + 3) % classes);
  return from_vector(v, {batch}, device);
}

// A case of model `m` (kept alive by the case) on batch x with targets y; `loss` takes the model's
// output and y.
template <class M, class Loss>
TrainCase case_of(std::shared_ptr<M> m, Tensor x, Tensor y, std::string shape, Loss loss) {
  TrainCase c;
  c.x = std::move(x);
  c.y = std::move(y);
  c.shape = std::move(shape);
  c.parameters = [m] { return m->parameters(); };
  c.forward = [m](const Tensor& x) { return m->forward(x); };
  c.criterion = loss;
  c.keep = m;
  return c;
}

Tensor cross_entropy_loss(const Tensor& out, const Tensor& y) { return cross_entropy(out, y); }
Tensor mse(const Tensor& out, const Tensor& y) { return mse_loss(out, y); }

TrainCase make_case(const std::string& name, Device device) {
  if (name == "mlp" || name == "mlp_dropout") {  // 784-512-512-10, batch 32, cross entropy
    // mlp_dropout: the same MLP with Dropout(p) after each hidden layer's relu.
    struct MlpWithDropout {
      MlpWithDropout(Device d, double p) : mlp(784, 512, 10, d), drop(p) {}
      samples::Mlp mlp;
      nn::Dropout drop;
      std::vector<Tensor*> parameters() { return mlp.parameters(); }
      Tensor forward(const Tensor& x) { return mlp.fc3(drop(relu(mlp.fc2(drop(relu(mlp.fc1(x))))))); }
    };
    return case_of(std::make_shared<MlpWithDropout>(device, name == "mlp" ? 0.0 : 0.2), randn({32, 784}, device, 1),
                   labels(32, 10, device), "[32,784]", cross_entropy_loss);
  }
  if (name == "cnn") {  // the seed CNN, batch 8 at 32x32, cross entropy over its outputs
    auto m = std::make_shared<samples::SmallCnn>(device);
    m->train();  // batch norm with batch statistics
    return case_of(m, randn({8, 3, 32, 32}, device, 1), labels(8, 10, device), "[8,3,32,32]", cross_entropy_loss);
  }
  if (name == "transformer")  // embed 128, 4 heads, batch 4, sequence 32, mse
    return case_of(std::make_shared<samples::TransformerBlock>(128, 4, device), randn({4, 32, 128}, device, 1),
                   randn({4, 32, 128}, device, 2), "[4,32,128]", mse);
  if (name == "resnet18") {  // torchvision's ResNet-18 in training mode, batch 8 at 224x224
    auto m = std::make_shared<samples::ResNet18>(10, device);
    m->train();
    return case_of(m, randn({8, 3, 224, 224}, device, 1), labels(8, 10, device), "[8,3,224,224]", cross_entropy_loss);
  }
  throw Error("kiln-bench-train: unknown model '" + name + "' (mlp, mlp_dropout, cnn, transformer, resnet18)");
}

struct StepTimes {
  double median_ms = 0, first_ms = 0;
  int64_t peak_bytes = 0;  // the device's MemoryStats peak over the timed steps
  int64_t step_bytes = 0;  // of which the steps allocated beyond what is held between them
  int64_t launches = 0, optimizer_launches = 0;  // compiled: kernels per step, those that only update
};

StepTimes time_steps(const Args& args, const Device& device, const std::function<void()>& step) {
  std::vector<double> times;
  StepTimes out;
  int64_t held = 0;
  for (int r = 0; r < args.warmup + args.reps; ++r) {
    if (r == args.warmup) {
      held = device.memory_stats().allocated_bytes;
      device.reset_peak_memory();
    }
    const auto start = Clock::now();
    step();
    wait_for(device);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (r == 0) out.first_ms = ms;
    if (r >= args.warmup) times.push_back(ms);
  }
  out.median_ms = median(times);
  out.peak_bytes = device.memory_stats().peak_allocated_bytes;
  out.step_bytes = out.peak_bytes - held;
  return out;
}

void bench(const Args& args) {
  std::printf("one training step (zero_grad, forward, loss, backward, SGD lr 0.01 momentum 0.9), eager\n"
              "and compiled, median ms of %d steps after %d warm-up steps; compiled: ", args.reps, args.warmup);
  if (args.compile == "forward")
    std::printf("the forward alone (memory_budget %g),\nits backward a compiled gradient program, the loss and "
                "update eager\n", args.memory_budget);
  else
    std::printf("the whole step as one program\n");
  if (args.mode == Mode::ReduceOverhead) std::printf("mode reduce-overhead: launches recorded once and replayed\n");
  if (args.mode == Mode::MaxAutotune) std::printf("mode max-autotune: template variants timed at compile\n");
  std::printf("%-12s %-10s %-14s %10s %10s %8s %12s %12s %9s %9s %9s %9s %8s %9s %9s\n", "model", "device", "batch",
              "eager ms", "compiled", "ratio", "eager 1st", "compiled 1st", "launches", "update", "eager MB",
              "comp. MB", "MB ratio", "eager +MB", "comp. +MB");
  for (const std::string& device_name : args.devices) {
    Device device;
    try {
      device = Device::parse(device_name);
    } catch (const Error& e) {
      std::printf("%-12s %-10s skipped: %s\n", "-", device_name.c_str(), e.what());
      continue;
    }
    for (const std::string& model : args.models) {
      std::string shape;
      auto run_mode = [&](bool compiled) {
        TrainCase c = make_case(model, device);
        shape = c.shape;
        std::vector<Tensor*> params = c.parameters();
        for (Tensor* p : params) p->requires_grad_();
        auto opt = std::make_shared<optim::SGD>(params, optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
        auto step_with = [opt, &c](const std::function<Tensor(const Tensor&)>& forward) {
          return [opt, &c, forward](const Tensor& x, const Tensor& y) {
            opt->zero_grad();
            Tensor loss = c.criterion(forward(x), y);
            loss.backward();
            opt->step();
            return loss;
          };
        };
        if (!compiled) return time_steps(args, device, [&] { step_with(c.forward)(c.x, c.y); });
        if (args.compile == "forward") {
          auto forward = compile(c.forward, {.mode = args.mode, .fullgraph = true,
                                             .memory_budget = args.memory_budget, .name = model + " forward"});
          auto step = step_with([&forward](const Tensor& x) { return forward(x); });
          return time_steps(args, device, [&] { step(c.x, c.y); });
        }
        auto step = compile(step_with(c.forward), {.mode = args.mode, .fullgraph = true, .name = model + " training step"});
        StepTimes times = time_steps(args, device, [&] { step(c.x, c.y); });
        for (const trace::BundleKernel& k : step.bundle().kernels) {
          ++times.launches;
          if (k.phase == "optimizer") ++times.optimizer_launches;  // launched for the update alone
        }
        return times;
      };
      // Each mode on its own copy of the model, made and freed around its steps. Its peak memory
      // counts from what the device held before: one model, its gradients, its optimizer state and
      // the step, not what earlier rows left in caches (eager backward passes keep their gradient
      // programs, with their arenas, for the process).
      auto run = [&](bool compiled) {
        const int64_t held_before = device.memory_stats().allocated_bytes;
        StepTimes times = run_mode(compiled);
        times.peak_bytes -= held_before;
        return times;
      };
      const StepTimes eager = run(false), compiled = run(true);
      const double eager_mb = double(eager.peak_bytes) / 1e6, compiled_mb = double(compiled.peak_bytes) / 1e6;
      std::printf("%-12s %-10s %-14s %10.2f %10.2f %7.2fx %12.1f %12.1f %9lld %9lld %9.2f %9.2f %7.2fx %9.2f %9.2f\n",
                  model.c_str(), device_name.c_str(), shape.c_str(), eager.median_ms, compiled.median_ms,
                  eager.median_ms / compiled.median_ms, eager.first_ms, compiled.first_ms,
                  static_cast<long long>(compiled.launches), static_cast<long long>(compiled.optimizer_launches),
                  eager_mb, compiled_mb, compiled_mb / eager_mb, double(eager.step_bytes) / 1e6,
                  double(compiled.step_bytes) / 1e6);
      std::fflush(stdout);  // each row as it is measured: a run cut by a time limit keeps them
    }
  }
}

int usage() {
  std::fprintf(stderr, "usage: kiln-bench-train [--devices cpu,vulkan] [--models mlp,mlp_dropout,cnn,transformer,resnet18] [--reps N] [--warmup N]\n"
                       "                        [--compile step|forward] [--memory-budget 0..1]\n"
                       "                        [--mode default|reduce-overhead|max-autotune]\n");
  return 2;
}

int main_impl(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    const char* value = argv[i + 1];
    if (flag == "--devices") args.devices = bench::split_list(value);
    else if (flag == "--models") args.models = bench::split_list(value);
    else if (flag == "--reps") args.reps = std::max(1, std::atoi(value));
    else if (flag == "--warmup") args.warmup = std::max(1, std::atoi(value));
    else if (flag == "--compile" && (std::string(value) == "step" || std::string(value) == "forward")) args.compile = value;
    else if (flag == "--memory-budget") args.memory_budget = std::atof(value);
    else if (flag == "--mode" && std::string(value) == "reduce-overhead") args.mode = Mode::ReduceOverhead;
    else if (flag == "--mode" && std::string(value) == "default") args.mode = Mode::Default;
    else if (flag == "--mode" && std::string(value) == "max-autotune") args.mode = Mode::MaxAutotune;
    else return usage();
  }
  bench(args);
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  try {
    return kiln::main_impl(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln-bench-train: %s\n", e.what());
    return 1;
  }
}
