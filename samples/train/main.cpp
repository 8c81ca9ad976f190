// kiln-sample-train: trains kiln-bench-compile's seed CNN, with a linear classifier on top, on
// the 8x8 digits with SGD, eagerly and then with each step compiled whole (kiln::compile,
// fullgraph, reduce-overhead), printing each epoch's loss, held-out accuracy and samples/s.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "samples/common/sample_models.h"
#include "samples/train/digits.h"

namespace kiln::samples {
namespace {

// The digits are grayscale and the seed CNN takes three channels: the gray one goes to all three.
class SeedCnnClassifier : public nn::UnaryModule {
 public:
  explicit SeedCnnClassifier(Device dev) : features(dev), head(64 * 3 * 3, 10, true, dev, /*seed=*/2) {
    register_module("features", features);
    register_module("head", head);
  }
  std::string type_name() const override { return "SeedCnnClassifier"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override {
    ScopeGuard guard = scope();
    Tensor rgb = expand(x, {-1, 3, -1, -1}, loc);  // [N, 3, 8, 8]
    return head(features.forward(rgb), loc);        // features: [N, 64 * 3 * 3]
  }

  SeedCnn features;
  nn::Linear head;
};

void usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--device NAME] [--data DIR]\n"
               "  --device NAME  cpu, vulkan, cuda:0 (default: the best device)\n"
               "  --data DIR     what samples/train/export_digits.py --out DIR wrote\n"
               "                 (default: %s, where the tests export it)\n",
               program, KILN_DIGITS_DIR);
}

int run(int argc, char** argv) {
  std::string device, dir = KILN_DIGITS_DIR;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if ((flag == "--device" || flag == "--data") && i + 1 < argc) {
      (flag == "--device" ? device : dir) = argv[++i];
    } else if (flag == "--help" || flag == "-h") {
      usage(argv[0]);
      return 0;
    } else {
      usage(argv[0]);
      return 2;
    }
  }
  std::optional<DigitsExport> data = load_digits(dir);
  if (!data) {
    std::fprintf(stderr,
                 "kiln-sample-train: SKIPPED: no digits in %s; write them with\n"
                 "  /usr/bin/python3 samples/train/export_digits.py --out %s\n",
                 dir.c_str(), dir.c_str());
    return 77;
  }
  const Device dev = device.empty() ? Device::best() : Device::parse(device);
  std::printf("training the seed CNN on %lld digits on %s (%s): SGD lr %g momentum %g, batch %g\n",
              static_cast<long long>(data->tensor("labels_train").numel()), dev.name().c_str(),
              dev.description().c_str(), data->setting("lr"), data->setting("momentum"),
              data->setting("batch_size"));
  constexpr double kFloor = 90;  // percent; a model that learned nothing gets about 10
  for (bool compiled : {false, true}) {
    const char* how = compiled ? "compiled" : "eager";
    SeedCnnClassifier model(dev);  // the same seeded weights for both
    std::printf("%s: before training, held-out accuracy %.2f%%\n", how, digits_accuracy(model, *data, dev));
    DigitsEpoch last = train_digits(model, *data, dev, [how](const DigitsEpoch& e) {
      std::printf("%s epoch %lld: loss %.4f, held-out accuracy %.2f%%, %.0f samples/s (%.1f s)\n", how,
                  static_cast<long long>(e.epoch), e.mean_loss, e.test_accuracy, e.samples_per_second, e.seconds);
    }, compiled);
    if (last.test_accuracy < kFloor) {
      std::fprintf(stderr, "kiln-sample-train: %s: held-out accuracy %.2f%% is under %.0f%%\n", how,
                   last.test_accuracy, kFloor);
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace kiln::samples

int main(int argc, char** argv) {
  try {
    return kiln::samples::run(argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln-sample-train: %s\n", e.what());
    return 1;
  }
}
