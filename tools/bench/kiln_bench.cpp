// kiln-bench: matmul GFLOP/s (cpu reference and Vulkan), elementwise bandwidth (an add, four
// transcendentals, a softmax, a layer norm, relu's gradient's where and a read back into a host
// vector) beside a host STREAM triad measured in the same run, eager dispatch overhead per op (with
// and without recording for autograd), and (Vulkan) the row templates against the generic
// lowering. Each figure is the median of --reps runs after one warm-up.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "core/kiln.h"
#include "core/runtime/eager_programs.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/stream_triad.h"
#ifdef KILN_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan/vulkan_norm_template.h"
#include "backends/vulkan/vulkan_templates.h"
#endif

namespace kiln {
namespace {

using bench::median;
using bench::stream_triad_gbs;
using bench::wait_for;

using Clock = std::chrono::steady_clock;

struct Args {
  std::string command;
  std::vector<int64_t> sizes{256, 512, 1024, 2048};
  std::vector<std::string> devices{"cpu", "vulkan"};
  int reps = 5;
  int64_t mib = 64;       // elementwise: bytes of each operand
  int64_t ops = 2000;     // eager: chain length
  int64_t elements = 1024;
  int64_t batch = 1;      // conv, pool: images per run
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median seconds of `body` over reps, after one warm-up run (compiles, first-touch allocations).
double time_median(int reps, const std::function<void()>& body) {
  body();
  std::vector<double> runs;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    body();
    runs.push_back(seconds_since(start));
  }
  return median(runs);
}

// CPU seconds the process (llvmpipe's threads included) has used: on a loaded machine this moves
// far less than wall time, so it compares variants measured minutes apart.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Median wall seconds of `reps` runs after one warm-up, and the process's CPU milliseconds per run
// over the same timed runs.
struct Timing {
  double seconds;
  double cpu_ms;
};
Timing time_with_cpu(int reps, const std::function<void()>& body) {
  double cpu0 = 0;
  int calls = 0;
  double s = time_median(reps, [&] {
    if (++calls == 2) cpu0 = process_cpu_seconds();  // from the end of the warm-up run
    body();
  });
  return {s, (process_cpu_seconds() - cpu0) / reps * 1e3};
}

void print_header() {
  std::printf("kiln-bench: %u host threads\n", std::thread::hardware_concurrency());
#ifdef KILN_HAVE_VULKAN
  try {
    Device vk = Device::parse("vulkan");
    auto& backend = dynamic_cast<vulkan::VulkanBackend&>(vk.backend());
    std::printf("vulkan device: %s (%s)\n", backend.name().c_str(), backend.driver_info().c_str());
  } catch (const Error& e) {
    std::printf("vulkan: not available (%s)\n", e.what());
  }
#endif
}

void bench_matmul(const Args& args) {
  std::printf("\nmatmul f32, C[N,N] = A[N,N] B[N,N], median of %d\n", args.reps);
  std::printf("%-8s %-10s %12s %12s %12s\n", "N", "device", "ms", "GFLOP/s", "CPU-ms");
  for (const std::string& name : args.devices) {
    Device device;
    try {
      device = Device::parse(name);
    } catch (const Error& e) {
      std::printf("%-8s %-10s skipped: %s\n", "-", name.c_str(), e.what());
      continue;
    }
    for (int64_t n : args.sizes) {
      Tensor a = randn({n, n}, device), b = randn({n, n}, device);
      const Timing t = time_with_cpu(args.reps, [&] {
        Tensor c = matmul(a, b);
        wait_for(device);
      });
      double gflops = 2.0 * double(n) * double(n) * double(n) / t.seconds / 1e9;
      std::printf("%-8lld %-10s %12.3f %12.2f %12.1f\n", (long long)n, name.c_str(), t.seconds * 1e3, gflops,
                  t.cpu_ms);
    }
  }
}

#ifdef KILN_HAVE_VULKAN
// Times matmul template variants directly (tuning aid): one line per tile.
void bench_tiles(const Args& args) {
  Device device = Device::parse("vulkan");
  Backend& backend = device.backend();
  const std::vector<vulkan::MatmulTile> tiles = vulkan::matmul_bench_tiles();
  std::printf("\nmatmul template tiles on %s, median of %d\n", backend.name().c_str(), args.reps);
  for (int64_t n : args.sizes) {
    auto a = backend.alloc(size_t(n * n * 4)), b = backend.alloc(size_t(n * n * 4)),
         c = backend.alloc(size_t(n * n * 4));
    std::vector<float> host(size_t(n * n), 0.5f);
    backend.upload(*a, host.data(), host.size() * 4);
    backend.upload(*b, host.data(), host.size() * 4);
    AttrMap attrs;
    BufferView views[3] = {{a.get(), DType::F32, {n, n}}, {b.get(), DType::F32, {n, n}},
                           {c.get(), DType::F32, {n, n}}};
    OpRun run{OpKind::MatMul, attrs, std::span(views, 2), std::span(views + 2, 1)};
    {
      EagerPrograms generic(backend, {.generic_only = true});
      double s = time_median(args.reps, [&] {
        generic.run(run);
        generic.sync();
      });
      std::printf("N=%-6lld generic lowering (one reduce kernel)    %9.3f ms %9.2f GFLOP/s\n",
                  (long long)n, s * 1e3, 2.0 * double(n * n) * double(n) / s / 1e9);
    }
    for (const vulkan::MatmulTile& t : tiles) {
      EagerPrograms runner(backend, {.templates = vulkan::glsl_template_planner(
                                         {.matmul_min_flops = 0, .force_tile = true, .tile = t})});
      const Timing time = time_with_cpu(args.reps, [&] {
        runner.run(run);
        runner.sync();
      });
      std::printf("N=%-6lld bm=%-3d bn=%-3d tm=%-2d tn=%-2d shared=%d texel=%d vec4=%d  %9.3f ms %9.2f GFLOP/s "
                  "%9.1f CPU-ms\n",
                  (long long)n, t.bm, t.bn, t.tm, t.tn, int(t.shared), int(t.texel), int(t.vec4), time.seconds * 1e3,
                  2.0 * double(n * n) * double(n) / time.seconds / 1e9, time.cpu_ms);
    }
  }
}

// Row ops on [4096, --elements] f32: the generic lowering (softmax and layer_norm: 3 launches) vs
// the one-launch row templates, with subgroup arithmetic (where the device has it) and with the
// shared-memory tree; each template's result is compared with the generic one.
void bench_norm(const Args& args) {
  Device device = Device::parse("vulkan");
  Backend& backend = device.backend();
  const int64_t rows = 4096, n = args.elements;
  std::printf("\nrow ops f32 [%lld, %lld] on %s, median of %d (GB/s: input + output bytes)\n", (long long)rows,
              (long long)n, backend.name().c_str(), args.reps);
  std::printf("%-12s %12s %12s %12s %9s %12s %10s\n", "op", "generic ms", "template ms", "tree ms", "speedup",
              "template GB/s", "max |diff|");
  auto x = backend.alloc(size_t(rows * n * 4)), y = backend.alloc(size_t(rows * n * 4));
  auto w = backend.alloc(size_t(n * 4)), b = backend.alloc(size_t(n * 4));
  std::vector<float> host(size_t(rows * n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = float((i * 7919) % 1000) / 250.0f - 2.0f;
  backend.upload(*x, host.data(), host.size() * 4);
  backend.upload(*w, host.data(), size_t(n * 4));
  backend.upload(*b, host.data() + n, size_t(n * 4));
  struct Case {
    const char* name;
    OpKind kind;
    AttrMap attrs;
    bool row_output;
  };
  std::vector<Case> cases(4);
  cases[0] = {"softmax", OpKind::Softmax, {}, false};
  cases[0].attrs.set("dim", int64_t(-1));
  cases[1] = {"log_softmax", OpKind::LogSoftmax, {}, false};
  cases[1].attrs.set("dim", int64_t(-1));
  cases[2] = {"layer_norm", OpKind::LayerNorm, {}, false};
  cases[2].attrs.set("axis", int64_t(-1));
  cases[2].attrs.set("eps", 1e-5);
  cases[3] = {"sum", OpKind::Sum, {}, true};
  cases[3].attrs.set("dims", std::vector<int64_t>{-1});
  cases[3].attrs.set("keepdim", false);
  for (const Case& c : cases) {
    std::vector<BufferView> ins = {{x.get(), DType::F32, {rows, n}}};
    if (c.kind == OpKind::LayerNorm) {
      ins.push_back({w.get(), DType::F32, {n}});
      ins.push_back({b.get(), DType::F32, {n}});
    }
    BufferView out{y.get(), DType::F32, c.row_output ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, n}};
    OpRun run{c.kind, c.attrs, ins, std::span(&out, 1)};
    const size_t out_count = size_t(c.row_output ? rows : rows * n);
    auto time_runner = [&](EagerPrograms& runner, std::vector<float>* result) {
      double s = time_median(args.reps, [&] {
        runner.run(run);
        runner.sync();
      });
      result->resize(out_count);
      backend.download(*y, result->data(), out_count * 4);
      return s;
    };
    EagerPrograms generic(backend, {.generic_only = true});
    EagerPrograms tmpl(backend, {.templates = vulkan::with_norm_template({})});
    EagerPrograms tree(backend, {.templates = vulkan::with_norm_template({}, {.subgroups = false})});
    std::vector<float> want, got, got_tree;
    const double gen_s = time_runner(generic, &want);
    const double tmpl_s = time_runner(tmpl, &got);
    const double tree_s = time_runner(tree, &got_tree);
    if (tmpl.stats().template_launches == 0) throw Error("kiln-bench norm: the " + std::string(c.name) +
                                                         " template did not run");
    double diff = 0;
    for (size_t i = 0; i < out_count; ++i)
      diff = std::max({diff, double(std::abs(got[i] - want[i])), double(std::abs(got_tree[i] - want[i]))});
    const double bytes = double(rows * n + out_count) * 4;
    std::printf("%-12s %12.3f %12.3f %12.3f %8.2fx %12.2f %10.2g\n", c.name, gen_s * 1e3, tmpl_s * 1e3,
                tree_s * 1e3, gen_s / tmpl_s, bytes / tmpl_s / 1e9, diff);
  }
}
#endif

void bench_elementwise(const Args& args) {
  const int64_t n = args.mib * (1 << 20) / 4;
  std::printf("\nelementwise add f32, %lld elements (%lld MiB per operand), median of %d\n",
              (long long)n, (long long)args.mib, args.reps);
  double triad = stream_triad_gbs(size_t(n) * 4, args.reps);
  std::printf("%-30s %10.2f GB/s\n", "host STREAM triad", triad);
  for (const std::string& name : args.devices) {
    Device device;
    try {
      device = Device::parse(name);
    } catch (const Error& e) {
      std::printf("%-30s skipped: %s\n", name.c_str(), e.what());
      continue;
    }
    Tensor a = randn({n}, device), b = randn({n}, device);
    double s = time_median(args.reps, [&] {
      Tensor c = add(a, b);
      wait_for(device);
    });
    double gbs = 3.0 * double(n) * 4 / s / 1e9;
    std::printf("%-30s %10.2f GB/s  (%.2f x triad)\n", ("add on " + name).c_str(), gbs, gbs / triad);
    // A row of the table: `bytes` moved in `seconds`, beside the triad.
    auto report = [&](const std::string& row, double bytes, double seconds) {
      const double rate = bytes / seconds / 1e9;
      std::printf("%-30s %10.2f GB/s  (%.2f x triad)  %.1f ms\n", (row + " on " + name).c_str(), rate, rate / triad,
                  seconds * 1e3);
    };
    // Transcendentals and selects into a fresh output, counted as one read and one write per element
    // (softmax and layer norm pass over their rows more than once).
    const std::pair<const char*, Tensor (*)(const Tensor&)> unary[] = {
        {"exp", [](const Tensor& x) { return exp(x); }},
        {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
        {"tanh", [](const Tensor& x) { return tanh(x); }},
        {"gelu", [](const Tensor& x) { return gelu(x); }},
        {"clip to [0, 6] (relu6)", [](const Tensor& x) { return clip(x, 0.0, 6.0); }},
        {"maximum with a scalar", [](const Tensor& x) { return maximum(x, 0.0); }},
        {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }},
        {"softmax (rows of 1024)", [](const Tensor& x) { return softmax(reshape(x, {-1, 1024}), -1); }},
        {"layer_norm (rows of 1024)", [](const Tensor& x) { return layer_norm(reshape(x, {-1, 1024}), {1024}); }},
        {"batch_norm (64 channels)",
         [](const Tensor& x) {
           const Tensor mean = zeros({64}, x.device()), var = ones({64}, x.device());
           return batch_norm(reshape(x, {-1, 64, 32, 32}), mean, var, ones({64}, x.device()), mean);
         }},
        {"group_norm (8 groups of 64)", [](const Tensor& x) {
           return group_norm(reshape(x, {-1, 64, 32, 32}), 8, ones({64}, x.device()), zeros({64}, x.device()));
         }}};
    for (const auto& [op, fn] : unary) {
      double seconds = time_median(args.reps, [&] {
        Tensor c = fn(a);
        wait_for(device);
      });
      report(op, 2.0 * double(n) * 4, seconds);
    }
    // relu's gradient, where(x > 0, g, 0): a bool, a float and a rank-0 scalar read per element.
    const Tensor zero = zeros({}, DType::F32, device), positive = gt(a, zero);
    double seconds = time_median(args.reps, [&] {
      Tensor c = where(positive, b, zero);
      wait_for(device);
    });
    report("where", 9.0 * double(n), seconds);
    // The tensor read back into a host vector (one read, one write per element).
    seconds = time_median(args.reps, [&] { std::vector<float> host = a.to_vector<float>(); });
    report("to_vector", 2.0 * double(n) * 4, seconds);
#ifdef KILN_HAVE_VULKAN
    if (device.kind() == BackendKind::Vulkan) {
      // The kernel alone: the same add into one output buffer allocated once, so neither the
      // allocation nor the first touch of fresh output pages is counted.
      Backend& backend = device.backend();
      auto x = backend.alloc(size_t(n) * 4), y = backend.alloc(size_t(n) * 4), z = backend.alloc(size_t(n) * 4);
      std::vector<float> host(size_t(n), 0.5f);
      backend.upload(*x, host.data(), host.size() * 4);
      backend.upload(*y, host.data(), host.size() * 4);
      AttrMap attrs;
      BufferView views[3] = {{x.get(), DType::F32, {n}}, {y.get(), DType::F32, {n}}, {z.get(), DType::F32, {n}}};
      OpRun run{OpKind::Add, attrs, std::span(views, 2), std::span(views + 2, 1)};
      EagerPrograms runner(backend);
      const Timing t = time_with_cpu(args.reps, [&] {
        runner.run(run);
        runner.sync();
      });
      double kgbs = 3.0 * double(n) * 4 / t.seconds / 1e9;
      std::printf("%-30s %10.2f GB/s  (%.2f x triad)  %.1f ms, %.1f CPU-ms per run\n",
                  "add kernel, output reused", kgbs, kgbs / triad, t.seconds * 1e3, t.cpu_ms);
    }
#endif
  }
}

void bench_eager(const Args& args) {
  std::printf("\neager dispatch: a chain of %lld dependent adds on %lld f32 elements, median of %d\n",
              (long long)args.ops, (long long)args.elements, args.reps);
  std::printf("%-10s %16s %16s\n", "device", "issue us/op", "total us/op");
  for (const std::string& name : args.devices) {
    Device device;
    try {
      device = Device::parse(name);
    } catch (const Error& e) {
      std::printf("%-10s skipped: %s\n", name.c_str(), e.what());
      continue;
    }
    Tensor x = randn({args.elements}, device);
    std::vector<double> issue, total;
    for (int r = 0; r <= args.reps; ++r) {  // run 0 warms up
      auto start = Clock::now();
      Tensor y = x;
      for (int64_t i = 0; i < args.ops; ++i) y = add(y, x);
      double issued = seconds_since(start);
      wait_for(device);
      double done = seconds_since(start);
      if (r == 0) continue;
      issue.push_back(issued * 1e6 / double(args.ops));
      total.push_back(done * 1e6 / double(args.ops));
    }
    std::printf("%-10s %16.2f %16.2f\n", name.c_str(), median(issue), median(total));
    // The same chain on an input that requires grad: every op also records what backward needs.
    Tensor leaf = x.detach();
    leaf.requires_grad_();
    std::vector<double> recorded;
    for (int r = 0; r <= args.reps; ++r) {
      auto start = Clock::now();
      Tensor y = leaf;
      for (int64_t i = 0; i < args.ops; ++i) y = add(y, leaf);
      if (r > 0) recorded.push_back(seconds_since(start) * 1e6 / double(args.ops));
      wait_for(device);
    }
    std::printf("%-10s %16.2f %16s  (recording for autograd: %.2fx the issue time)\n", name.c_str(),
                median(recorded), "-", median(recorded) / median(issue));
    if (device.kind() == BackendKind::Cpu || device.kind() == BackendKind::Ref) continue;
    // The same chain waiting after every op, as eager mode did before launches were queued.
    std::vector<double> waited;
    for (int r = 0; r < args.reps; ++r) {
      auto start = Clock::now();
      Tensor y = x;
      for (int64_t i = 0; i < args.ops; ++i) {
        y = add(y, x);
        wait_for(device);
      }
      waited.push_back(seconds_since(start) * 1e6 / double(args.ops));
    }
    std::printf("%-10s %16s %16.2f  (waiting after every op)\n", name.c_str(), "-", median(waited));
  }
}

// Parses a device name, or prints why it is skipped.
std::optional<Device> open_device(const std::string& name) {
  try {
    return Device::parse(name);
  } catch (const Error& e) {
    std::printf("%-10s skipped: %s\n", name.c_str(), e.what());
    return std::nullopt;
  }
}

// 3x3 convs (stride 1, pad 1) at ResNet-18's four layer shapes beside a matmul of the conv's
// implicit-GEMM size (M = output pixels, N = output channels, K = C * 9) on the same device, in the
// same run: the ratio is how close conv comes to the matmul machinery.
void bench_conv(const Args& args) {
  std::printf("\nconv2d 3x3 f32 at ResNet-18 layer shapes, batch %lld, median of %d\n", (long long)args.batch,
              args.reps);
  std::printf("%-10s %-16s %10s %10s %16s %10s %10s %12s\n", "device", "C=O, HxW", "conv ms", "GFLOP/s",
              "matmul MxNxK", "ms", "GFLOP/s", "conv/matmul");
  struct Layer {
    int64_t channels, size;
  };
  for (const std::string& name : args.devices) {
    std::optional<Device> device = open_device(name);
    if (!device) continue;
    for (Layer layer : {Layer{64, 56}, Layer{128, 28}, Layer{256, 14}, Layer{512, 7}}) {
      const int64_t c = layer.channels, hw = layer.size;
      const int64_t m = args.batch * hw * hw, n = c, k = c * 9;
      const double flop = 2.0 * double(m) * double(n) * double(k);
      Tensor x = randn({args.batch, c, hw, hw}, *device), w = randn({c, c, 3, 3}, *device);
      const double conv_s = time_median(args.reps, [&] {
        Tensor y = conv2d(x, w, {}, 1, 1);
        wait_for(*device);
      });
      Tensor a = randn({m, k}, *device), b = randn({k, n}, *device);
      const double matmul_s = time_median(args.reps, [&] {
        Tensor y = matmul(a, b);
        wait_for(*device);
      });
      const std::string shape = std::to_string(c) + ", " + std::to_string(hw) + "x" + std::to_string(hw);
      const std::string gemm = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
      std::printf("%-10s %-16s %10.3f %10.2f %16s %10.3f %10.2f %11.2fx\n", name.c_str(), shape.c_str(),
                  conv_s * 1e3, flop / conv_s / 1e9, gemm.c_str(), matmul_s * 1e3, flop / matmul_s / 1e9,
                  matmul_s / conv_s);
    }
  }
}

// ResNet's first pool (max 3x3, stride 2, pad 1 on 64x112x112) and a 2x2 average pool, beside a
// pointwise op (neg) over the same input: a copy of the pool's input bytes.
void bench_pool(const Args& args) {
  std::printf("\npooling f32 on [%lld, 64, 112, 112], median of %d\n", (long long)args.batch, args.reps);
  std::printf("%-10s %-24s %10s %14s %12s\n", "device", "op", "ms", "copy (neg) ms", "op/copy");
  for (const std::string& name : args.devices) {
    std::optional<Device> device = open_device(name);
    if (!device) continue;
    Tensor x = randn({args.batch, 64, 112, 112}, *device);
    const double copy_s = time_median(args.reps, [&] {
      Tensor y = neg(x);
      wait_for(*device);
    });
    struct Case {
      const char* name;
      std::function<Tensor()> run;
    };
    const Case cases[] = {{"max_pool2d k3 s2 p1", [&] { return max_pool2d(x, 3, 2, 1); }},
                          {"avg_pool2d k2 s2", [&] { return avg_pool2d(x, 2); }}};
    for (const Case& c : cases) {
      const double s = time_median(args.reps, [&] {
        Tensor y = c.run();
        wait_for(*device);
      });
      std::printf("%-10s %-24s %10.3f %14.3f %11.2fx\n", name.c_str(), c.name, s * 1e3, copy_s * 1e3, s / copy_s);
    }
  }
}

std::vector<int64_t> parse_sizes(const char* text) {
  std::vector<int64_t> out;
  for (const char* p = text; *p;) {
    out.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return out;
}

int usage() {
  std::fprintf(stderr,
               "usage: kiln-bench <matmul|elementwise|eager|conv|pool|all"
#ifdef KILN_HAVE_VULKAN
               "|tiles|norm"
#endif
               "> [--sizes 256,512,...] [--devices cpu,vulkan] [--reps N]\n"
               "                  [--mib M] [--ops N] [--elements N] [--batch N]\n");
  return 2;
}

int main_impl(int argc, char** argv) {
  if (argc < 2) return usage();
  Args args;
  args.command = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--sizes") args.sizes = parse_sizes(value);
    else if (flag == "--reps") args.reps = std::max(1, std::atoi(value));
    else if (flag == "--mib") args.mib = std::atoll(value);
    else if (flag == "--ops") args.ops = std::atoll(value);
    else if (flag == "--elements") args.elements = std::atoll(value);
    else if (flag == "--batch") args.batch = std::max<int64_t>(1, std::atoll(value));
    else if (flag == "--devices") args.devices = bench::split_list(value);
    else return usage();
  }
  print_header();
  if (args.command == "matmul" || args.command == "all") bench_matmul(args);
  if (args.command == "elementwise" || args.command == "all") bench_elementwise(args);
  if (args.command == "eager" || args.command == "all") bench_eager(args);
  if (args.command == "conv" || args.command == "all") bench_conv(args);
  if (args.command == "pool" || args.command == "all") bench_pool(args);
#ifdef KILN_HAVE_VULKAN
  if (args.command == "tiles") bench_tiles(args);
  if (args.command == "norm") bench_norm(args);
#endif
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  try {
    return kiln::main_impl(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln-bench: %s\n", e.what());
    return 1;
  }
}
