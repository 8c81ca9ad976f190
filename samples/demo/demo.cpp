// The demo: a small model run eagerly on the best device, printing its result.
#include <cstdio>

#include <kiln/kiln.h>

int main() {
  using namespace kiln;
  Device dev = Device::best();
  std::printf("device: %s (%s)\n", dev.name().c_str(), dev.description().c_str());
  Tensor x = randn({2, 4}, dev, 1);
  Tensor y = relu(x * 2.0f + 1.0f);
  for (float v : y.to_vector<float>()) std::printf("%.4f ", v);
  std::printf("\n");
}
