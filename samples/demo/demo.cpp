// The demo: a small CNN run eagerly on the best device. It prints every op it ran with the source
// line and module scope that op records, then the class probabilities.
#include <cstdio>

#include <kiln/kiln.h>

#include "core/frontend/dispatch.h"

using namespace kiln;

// conv -> batch norm -> relu -> pool -> conv -> relu -> global pool -> linear -> softmax
class SmallCnn : public nn::Module {
 public:
  explicit SmallCnn(Device dev)
      : conv1(3, 8, 3, /*stride=*/1, /*padding=*/1, 1, 1, true, dev, /*seed=*/1),
        bn1(8, 1e-5, dev),
        conv2(8, 16, 3, 1, 1, 1, 1, true, dev, 2),
        fc(16, 10, true, dev, 3) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("fc", fc);
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

int main() {
  try {
    Device dev = Device::best();
    std::printf("device: %s (%s)\n\n", dev.name().c_str(), dev.description().c_str());
    SmallCnn model(dev);
    Tensor images = randn({2, 3, 16, 16}, dev, /*seed=*/7);

    set_op_observer([](OpKind kind, const Provenance& where, const std::vector<Tensor>& outs) {
      std::printf("  %-16s %-22s at %s\n", std::string(op_name(kind)).c_str(),
                  outs.at(0).type().str().c_str(), where.str().c_str());
    });
    std::printf("ops run:\n");
    Tensor probs = model.forward(images);
    set_op_observer(nullptr);

    std::vector<float> p = probs.to_vector<float>();
    std::printf("\nclass probabilities %s:\n", probs.type().str().c_str());
    for (int64_t n = 0; n < 2; ++n) {
      std::printf("  image %lld:", static_cast<long long>(n));
      for (int64_t c = 0; c < 10; ++c) std::printf(" %.3f", p[size_t(n * 10 + c)]);
      std::printf("\n");
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln-demo: %s\n", e.what());
    return 1;
  }
}
