// The samples' models (MLP, CNN, transformer block, ResNet basic block) with seeded weights,
// and the harness that runs one eagerly and through kiln::compile, compares the two and times both.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln::samples {

// mlp: Linear -> relu -> Linear -> relu -> Linear.
class Mlp : public nn::Module {
 public:
  Mlp(int64_t in, int64_t hidden, int64_t out, Device dev)
      : fc1(in, hidden, true, dev, /*seed=*/11), fc2(hidden, hidden, true, dev, 12),
        fc3(hidden, out, true, dev, 13) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  std::string type_name() const override { return "Mlp"; }
  Tensor forward(const Tensor& x) { return fc3(relu(fc2(relu(fc1(x))))); }

  nn::Linear fc1, fc2, fc3;
};

// The seed CNN kiln-bench-compile times and kiln-sample-train trains: conv 3->64 k3, relu,
// max pool 2, flatten.
class SeedCnn : public nn::Module {
 public:
  explicit SeedCnn(Device dev) : conv(3, 64, 3, 1, 0, 1, 1, true, dev, /*seed=*/1) {
    register_module("conv", conv);
  }
  std::string type_name() const override { return "SeedCnn"; }
  Tensor forward(const Tensor& x) { return flatten(max_pool2d(relu(conv(x)), 2), 1); }
  nn::Conv2d conv;
};

// Running statistics and affine terms that are not the identity, so batch norm does real work.
inline void seed_batch_norm(nn::BatchNorm2d& bn, Device dev, uint64_t seed) {
  int64_t c = bn.num_features;
  bn.weight = rand({c}, dev, seed) + 0.5;
  bn.bias = randn({c}, dev, seed + 1) * 0.1;
  bn.running_mean = randn({c}, dev, seed + 2) * 0.1;
  bn.running_var = rand({c}, dev, seed + 3) + 0.5;
  bn.weight.requires_grad_();  // new tensors in the parameters' slots: still parameters
  bn.bias.requires_grad_();
}

// cnn: the demo's SmallCnn.
// conv -> bn -> relu -> pool -> conv -> relu -> global pool -> fc -> softmax.
class SmallCnn : public nn::Module {
 public:
  explicit SmallCnn(Device dev)
      : conv1(3, 8, 3, /*stride=*/1, /*padding=*/1, 1, 1, true, dev, /*seed=*/1), bn1(8, 1e-5, 0.1, dev),
        conv2(8, 16, 3, 1, 1, 1, 1, true, dev, 2), fc(16, 10, true, dev, 3) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("fc", fc);
    seed_batch_norm(bn1, dev, 4);
    eval();  // an inference model: batch norm uses the seeded running statistics
  }
  std::string type_name() const override { return "SmallCnn"; }
  Tensor forward(const Tensor& x) {
    Tensor y = relu(bn1(conv1(x)));
    y = max_pool2d(y, 2);
    y = relu(conv2(y));
    y = flatten(global_avg_pool(y), 1);
    return softmax(fc(y), 1);
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::Linear fc;
};

// transformer_block: pre-norm. x += attn(ln1(x)); x += fc2(gelu(fc1(ln2(x)))).
class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(int64_t embed, int64_t heads, Device dev)
      : ln1({embed}, 1e-5, dev), attn(embed, heads, true, /*batch_first=*/true, dev, /*seed=*/21),
        ln2({embed}, 1e-5, dev), fc1(embed, 4 * embed, true, dev, 22),
        fc2(4 * embed, embed, true, dev, 23) {
    register_module("ln1", ln1);
    register_module("attn", attn);
    register_module("ln2", ln2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  std::string type_name() const override { return "TransformerBlock"; }
  Tensor forward(const Tensor& x) {
    Tensor h = ln1(x);
    Tensor y = x + attn(h, h, h);
    return y + fc2(gelu(fc1(ln2(y))));
  }

  nn::LayerNorm ln1;
  nn::MultiheadAttention attn;
  nn::LayerNorm ln2;
  nn::Linear fc1, fc2;
};

// resnet_block: torchvision's BasicBlock without downsampling.
// conv3x3 -> bn -> relu -> conv3x3 -> bn, plus the input, then relu.
class ResNetBlock : public nn::Module {
 public:
  ResNetBlock(int64_t channels, Device dev)
      : conv1(channels, channels, 3, 1, 1, 1, 1, /*bias=*/false, dev, /*seed=*/31),
        bn1(channels, 1e-5, 0.1, dev), conv2(channels, channels, 3, 1, 1, 1, 1, false, dev, 32),
        bn2(channels, 1e-5, 0.1, dev) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    seed_batch_norm(bn1, dev, 33);
    seed_batch_norm(bn2, dev, 37);
    eval();  // an inference model: batch norm uses the seeded running statistics
  }
  std::string type_name() const override { return "ResNetBlock"; }
  Tensor forward(const Tensor& x) {
    Tensor y = relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return relu(y + x);
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
};

// torchvision's BasicBlock with its downsampling: conv3x3 (stride) -> bn -> relu -> conv3x3 -> bn,
// plus the input (through `downsample`, a strided 1x1 conv and bn, where the shape changes), then
// relu. Modules are named as torchvision names them.
class BasicBlock : public nn::Module {
 public:
  struct Downsample : nn::Module {
    Downsample(int64_t in, int64_t out, int64_t stride, Device dev, uint64_t seed)
        : conv(in, out, 1, stride, 0, 1, 1, false, dev, seed), bn(out, 1e-5, 0.1, dev) {
      register_module("0", conv);
      register_module("1", bn);
    }
    std::string type_name() const override { return "Sequential"; }
    nn::Conv2d conv;
    nn::BatchNorm2d bn;
  };

  BasicBlock(int64_t in, int64_t out, int64_t stride, Device dev, uint64_t seed)
      : conv1(in, out, 3, stride, 1, 1, 1, false, dev, seed), bn1(out, 1e-5, 0.1, dev),
        conv2(out, out, 3, 1, 1, 1, 1, false, dev, seed + 1), bn2(out, 1e-5, 0.1, dev) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      downsample = std::make_unique<Downsample>(in, out, stride, dev, seed + 2);
      register_module("downsample", *downsample);
    }
  }
  std::string type_name() const override { return "BasicBlock"; }
  Tensor forward(const Tensor& x) {
    Tensor y = bn2(conv2(relu(bn1(conv1(x)))));
    return relu(y + (downsample ? downsample->bn(downsample->conv(x)) : x));
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  std::unique_ptr<Downsample> downsample;
};

// torchvision's ResNet-18: conv 7x7/2 -> bn -> relu -> max pool 3/2, four layers of two
// BasicBlocks (64, 128, 256, 512 channels; the last three start with stride 2), global average
// pool, linear. Seeded weights; in training mode batch norm uses the batch's statistics.
class ResNet18 : public nn::Module {
 public:
  struct Layer : nn::Module {
    Layer(int64_t in, int64_t out, int64_t stride, Device dev, uint64_t seed)
        : first(in, out, stride, dev, seed), second(out, out, 1, dev, seed + 3) {
      register_module("0", first);
      register_module("1", second);
    }
    std::string type_name() const override { return "Sequential"; }
    Tensor forward(const Tensor& x) { return second.forward(first.forward(x)); }
    BasicBlock first, second;
  };

  ResNet18(int64_t classes, Device dev)
      : conv1(3, 64, 7, 2, 3, 1, 1, false, dev, 41), bn1(64, 1e-5, 0.1, dev), fc(512, classes, true, dev, 42) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t out = int64_t(64) << i;
      layers.push_back(std::make_unique<Layer>(i == 0 ? 64 : out / 2, out, i == 0 ? 1 : 2, dev, 50 + 6 * uint64_t(i)));
      register_module("layer" + std::to_string(i + 1), *layers.back());
    }
    register_module("fc", fc);
  }
  std::string type_name() const override { return "ResNet18"; }
  Tensor forward(const Tensor& x) {
    Tensor y = max_pool2d(relu(bn1(conv1(x))), 3, 2, 1);
    for (auto& layer : layers) y = layer->forward(y);
    return fc(flatten(global_avg_pool(y), 1));
  }

  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  std::vector<std::unique_ptr<Layer>> layers;
  nn::Linear fc;
};

// Command-line flags every sample takes.
struct Args {
  std::string device;  // empty: Device::best()
  std::string model = "mlp";
  bool small = false;  // tiny sizes, for the tests
  int reps = 5;
};

inline void print_usage(const char* program, bool with_model) {
  std::fprintf(stderr,
               "usage: %s [--device NAME] [--small] [--reps N]%s\n"
               "  --device NAME  cpu, ref, vulkan, vulkan:1, cuda:0 (default: the best device)\n"
               "  --small        tiny sizes (quick check)\n"
               "  --reps N       timed calls after warm-up; the median is printed (default 5)\n",
               program, with_model ? " [--model mlp|cnn|transformer|resnet]" : "");
}

// Parses argv; exits 0 on --help and 2 on a bad flag.
inline Args parse_args(int argc, char** argv, bool with_model = false) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", argv[0], f.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (f == "--device" && !with_model) {
      a.device = value();
    } else if (f == "--model" && with_model) {
      a.model = value();
    } else if (f == "--small") {
      a.small = true;
    } else if (f == "--reps") {
      a.reps = std::max(1, std::atoi(value().c_str()));
    } else if (f == "--help" || f == "-h") {
      print_usage(argv[0], with_model);
      std::exit(0);
    } else {
      std::fprintf(stderr, "%s: unknown flag '%s'\n", argv[0], f.c_str());
      print_usage(argv[0], with_model);
      std::exit(2);
    }
  }
  return a;
}

inline Device pick_device(const Args& a) {
  return a.device.empty() ? Device::best() : Device::parse(a.device);
}

// Max |got - want| and that over max |want| (normwise, so near-zero elements do not blow it up).
struct Error2 {
  double abs = 0, rel = 0;
};
inline Error2 compare(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    throw Error("samples: compared outputs differ in size (" + std::to_string(got.size()) +
                " vs " + std::to_string(want.size()) + ")");
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = std::fabs(double(got[i]) - double(want[i]));
    if (!(d <= max_diff)) max_diff = d;  // NaN propagates as the max
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
  }
  return {max_diff, max_diff / std::max(max_ref, 1e-30)};
}

inline constexpr double kRelTolerance = 1e-4;

// One model's run on one device: outputs, median times and the compiled program's statistics.
struct RunResult {
  std::vector<float> eager, compiled;
  double eager_ms = 0, compiled_ms = 0;
  CompileStats stats;
};

inline double median_ms(int reps, const std::function<void()>& body) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    auto elapsed = std::chrono::steady_clock::now() - start;
    ms.push_back(std::chrono::duration<double, std::milli>(elapsed).count());
  }
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

// Runs model.forward(x) eagerly and compiled (fullgraph: a graph break is an error), one warm-up
// call each, then `reps` timed calls. Eager launches may be asynchronous, so each timed eager call
// waits for the device; a compiled run returns after its stream finished.
template <class M>
RunResult run_model(M& model, const Tensor& x, int reps) {
  NoGradGuard no_grad;  // inference: the parameters require grad, the forwards need not record
  RunResult r;
  Backend& backend = x.device().backend();
  r.eager = model.forward(x).template to_vector<float>();
  r.eager_ms = median_ms(reps, [&] {
    Tensor y = model.forward(x);
    backend.synchronize();
  });

  CompileOptions options;
  options.fullgraph = true;
  options.name = model.type_name();
  auto compiled = kiln::compile([](M& m, const Tensor& in) { return m.forward(in); }, options);
  r.compiled = compiled(model, x).template to_vector<float>();
  r.compiled_ms = median_ms(reps, [&] { Tensor y = compiled(model, x); });
  r.stats = compiled.stats();
  return r;
}

// A model picked by name with its input, built on `dev`. Sizes shrink with `small`.
struct NamedRun {
  std::string model;
  std::string input_type;
  RunResult result;
};

inline NamedRun run_named(const std::string& name, Device dev, bool small, int reps) {
  NamedRun out{name, "", {}};
  auto go = [&](auto& model, const Tensor& x) {
    out.input_type = x.type().str();
    out.result = run_model(model, x, reps);
  };
  if (name == "mlp") {
    int64_t batch = small ? 4 : 64, in = small ? 32 : 256, hidden = small ? 64 : 512;
    Mlp m(in, hidden, 10, dev);
    go(m, randn({batch, in}, dev, /*seed=*/7));
  } else if (name == "cnn") {
    int64_t batch = small ? 2 : 8, hw = small ? 16 : 32;
    SmallCnn m(dev);
    go(m, randn({batch, 3, hw, hw}, dev, 7));
  } else if (name == "transformer") {
    int64_t batch = small ? 2 : 4, seq = small ? 8 : 64, embed = small ? 32 : 128;
    TransformerBlock m(embed, small ? 2 : 4, dev);
    go(m, randn({batch, seq, embed}, dev, 7));
  } else if (name == "resnet") {
    int64_t batch = small ? 1 : 4, c = small ? 8 : 64, hw = small ? 8 : 28;
    ResNetBlock m(c, dev);
    go(m, randn({batch, c, hw, hw}, dev, 7));
  } else {
    throw Error("samples: unknown model '" + name + "'; pick mlp, cnn, transformer or resnet");
  }
  return out;
}

// The single-model sample's main: run on one device, print the report, exit 1 on disagreement.
inline int sample_main(const char* program, const std::string& model, int argc, char** argv) {
  Args args = parse_args(argc, argv);
  try {
    Device dev = pick_device(args);
    std::printf("%s on %s (%s)\n", model.c_str(), dev.name().c_str(), dev.description().c_str());
    NamedRun run = run_named(model, dev, args.small, args.reps);
    const RunResult& r = run.result;
    Error2 e = compare(r.compiled, r.eager);
    const ProgramStats& p = r.stats.program;
    std::printf("  input          %s\n", run.input_type.c_str());
    std::printf("  eager          %10.3f ms (median of %d)\n", r.eager_ms, args.reps);
    std::printf("  compiled       %10.3f ms (median of %d)\n", r.compiled_ms, args.reps);
    std::printf("  kernels        %10lld (graph nodes %lld)\n", (long long)p.kernels,
                (long long)p.nodes);
    if (p.naive_bytes == 0 && p.planned_bytes == 0) {
      // The cpu reference runs programs node by node through the interpreter: no arena to plan.
      std::printf("  memory         not planned (%s runs compiled graphs in the interpreter)\n",
                  dev.name().c_str());
    } else {
      std::printf("  memory naive   %10lld bytes\n", (long long)p.naive_bytes);
      std::printf("  memory planned %10lld bytes (lower bound %lld)\n", (long long)p.planned_bytes,
                  (long long)p.lower_bound_bytes);
    }
    std::printf("  compiled vs eager: max abs %.3g, max rel %.3g (tolerance rel %.0e)\n", e.abs,
                e.rel, kRelTolerance);
    if (!(e.rel <= kRelTolerance)) {
      std::fprintf(stderr, "%s: compiled output disagrees with eager (rel %.3g > %.0e)\n", program,
                   e.rel, kRelTolerance);
      return 1;
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace kiln::samples
