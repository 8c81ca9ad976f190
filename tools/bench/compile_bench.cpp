// kiln-bench-compile: compiled vs eager on one device, in the same run, for the workloads the
// compile targets name: a 24-op pointwise chain on 16M floats, a data-dependent loop, the seed CNN (conv 3->64 k3, relu,
// max pool 2, flatten; batch 8, 224x224), the samples' MLP and transformer block; the memory plan
// (naive / lower bound / planned) of each; and ReduceOverhead's host cost per kernel.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "samples/common/sample_models.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/stream_triad.h"

namespace kiln {
namespace {

using bench::median;
using bench::stream_triad_gbs;

using Clock = std::chrono::steady_clock;

// Median ms of `body` over reps after one warm-up call.
double time_ms(int reps, const std::function<void()>& body) {
  body();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    body();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return median(ms);
}

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

// The 24-op chain: every op a different pointwise function, values kept in a moderate range.
Tensor chain24(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < 4; ++i) {
    y = y * 1.001 + 0.01;
    y = relu(y) - 0.5;
    y = sigmoid(y) * 2.0;
  }
  return y;
}

// A data-dependent loop (kiln::while_loop): 20 iterations of a 5-op body, the count carried on the
// device. Eagerly every iteration reads the predicate on the host; compiled, one program runs the
// loop with its cond and body compiled once.
Tensor loop20(const Tensor& x) {
  return while_loop([](const std::vector<Tensor>& c) { return lt(c[0], 20.0); },
                    [](const std::vector<Tensor>& c) {
                      return std::vector<Tensor>{c[0] + 1.0, sigmoid(c[1] * 1.5 - 0.5) * 2.0 + 0.1};
                    },
                    {amax(x) * 0.0, x})[1];
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(bytes) / (1 << 20));
  return buf;
}

const char* only_rows = nullptr;  // --only: the rows whose name contains it

// One row: eager and compiled medians, kernels, memory, max abs difference. Returns the compiled
// median (ms), 0 for a row --only skips.
template <class Fn, class... Args>
double row(const char* name, int reps, Device dev, Fn fn, Args&... args) {
  if (only_rows && !std::strstr(name, only_rows)) return 0;
  Backend& backend = dev.backend();
  std::vector<float> eager_out;
  const double eager_ms = time_ms(reps, [&] {
    Tensor y = fn(args...);
    backend.synchronize();
    if (eager_out.empty()) eager_out = y.template to_vector<float>();
  });
  auto compiled = kiln::compile(fn, {.fullgraph = true, .name = name});
  std::vector<float> compiled_out = compiled(args...).template to_vector<float>();
  const double compiled_ms = time_ms(reps, [&] { Tensor y = compiled(args...); });
  const CompileStats s = compiled.stats();
  double diff = 0;
  for (size_t i = 0; i < eager_out.size() && i < compiled_out.size(); ++i)
    diff = std::max(diff, double(std::abs(eager_out[i] - compiled_out[i])));
  std::printf("| %s | %.2f | %.2f | %.2f | %lld | %s | %s | %s | %.2g |\n", name, eager_ms,
              compiled_ms, eager_ms / compiled_ms, (long long)s.program.kernels,
              mib(s.program.naive_bytes).c_str(), mib(s.program.lower_bound_bytes).c_str(),
              mib(s.program.planned_bytes).c_str(), diff);
  std::fflush(stdout);
  return compiled_ms;
}

// ReduceOverhead: the calling thread's CPU time per call (guards, binding, submit; waiting for the
// device sleeps), per kernel, beside Default mode's.
template <class Fn, class... Args>
void overhead_row(const char* name, int reps, Fn fn, Args&... args) {
  if (only_rows && !std::strstr(name, only_rows)) return;
  for (Mode mode : {Mode::Default, Mode::ReduceOverhead}) {
    auto compiled = kiln::compile(fn, {.mode = mode, .fullgraph = true, .name = name});
    Tensor warm = compiled(args...);
    std::vector<double> cpu_us, wall_ms;
    for (int i = 0; i < reps; ++i) {
      const double cpu = thread_cpu_us();
      const auto start = Clock::now();
      Tensor y = compiled(args...);
      wall_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      cpu_us.push_back(thread_cpu_us() - cpu);
    }
    const int64_t kernels = compiled.stats().program.kernels;
    std::printf("| %s | %s | %lld | %.2f | %.1f | %.2f |\n", name,
                mode == Mode::Default ? "default" : "reduce-overhead", (long long)kernels,
                median(wall_ms), median(cpu_us), median(cpu_us) / double(kernels));
  }
}

int run(int argc, char** argv) {
  NoGradGuard no_grad;  // every workload is inference: the eager rows record nothing for autograd
  std::string device = "vulkan";
  int reps = 5;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--small")) small = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only_rows = argv[++i];
    else {
      std::fprintf(stderr, "usage: kiln-bench-compile [--device D] [--reps N] [--small] [--only NAME_PART]\n");
      return 2;
    }
  }
  const Device dev = Device::parse(device);
  std::printf("device %s (%s), median of %d calls after one warm-up\n\n", dev.name().c_str(),
              dev.description().c_str(), reps);
  std::printf("| workload | eager ms | compiled ms | eager / compiled | kernels | naive MiB | "
              "lower bound MiB | planned MiB | max abs diff |\n|---|---|---|---|---|---|---|---|---|\n");
  const int64_t side = small ? 256 : 4096;  // 4096^2 = 16M floats
  Tensor big = randn({side, side}, dev, 3);
  const double chain_ms = row("pointwise chain, 24 ops", reps, dev, [](const Tensor& x) { return chain24(x); }, big);
  Tensor loop_in = randn({small ? 64 : 1024, 1024}, dev, 7);
  row("while_loop, 20 iterations of 5 ops", reps, dev, [](const Tensor& x) { return loop20(x); }, loop_in);
  samples::SeedCnn cnn(dev);
  Tensor images = randn({small ? 1 : 8, 3, small ? 32 : 224, small ? 32 : 224}, dev, 4);
  row("seed CNN", reps, dev, [](samples::SeedCnn& m, const Tensor& x) { return m.forward(x); }, cnn, images);
  samples::Mlp mlp(256, 512, 10, dev);
  Tensor mlp_in = randn({64, 256}, dev, 5);
  row("MLP 64x256-512-512-10", reps, dev, [](samples::Mlp& m, const Tensor& x) { return m.forward(x); },
      mlp, mlp_in);
  samples::TransformerBlock block(128, 4, dev);
  Tensor tokens = randn({4, 64, 128}, dev, 6);
  auto block_fn = [](samples::TransformerBlock& m, const Tensor& x) { return m.forward(x); };
  row("transformer block 4x64x128", reps, dev, block_fn, block, tokens);

  std::printf("\n| workload | mode | kernels | call ms | host CPU us per call | host CPU us per kernel |\n"
              "|---|---|---|---|---|---|\n");
  overhead_row("transformer block 4x64x128", std::max(reps, 20), block_fn, block, tokens);

  if (chain_ms > 0) {  // the compiled chain reads its input and writes its output once
    const double bytes = 2.0 * double(big.numel()) * sizeof(float);
    const double chain_gbs = bytes / (chain_ms * 1e-3) / 1e9, triad = stream_triad_gbs(size_t(big.numel()) * 4, reps);
    std::printf("\ncompiled pointwise chain: %.2f GB/s; host STREAM triad %.2f GB/s; chain / triad %.2fx\n",
                chain_gbs, triad, chain_gbs / triad);
  }
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  try {
    return kiln::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-bench-compile: %s\n", e.what());
    return 1;
  }
}
