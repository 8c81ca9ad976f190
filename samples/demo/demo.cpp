// The demo: the samples' small CNN run eagerly on the best device. It prints every op it ran with
// the source line and module scope that op records, then the class probabilities.
#include <cstdio>

#include <kiln/kiln.h>

#include "core/frontend/dispatch.h"
#include "samples/common/sample_models.h"

using namespace kiln;

int main() {
  try {
    Device dev = Device::best();
    std::printf("device: %s (%s)\n\n", dev.name().c_str(), dev.description().c_str());
    samples::SmallCnn model(dev);  // samples/common/sample_models.h
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
