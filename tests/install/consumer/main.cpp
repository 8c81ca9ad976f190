// Runs a few ops eagerly on cpu through an installed kiln and checks the result.
#include <cstdio>

#include <kiln/kiln.h>

int main() {
  using namespace kiln;
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = relu(a * 2.0f - 3.0f);  // {0, 1, 3, 5}
  std::vector<float> v = b.to_vector<float>();
  bool ok = v == std::vector<float>{0, 1, 3, 5};
  std::printf("consumer: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
