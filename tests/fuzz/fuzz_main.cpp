// One libFuzzer program: KILN_FUZZ_BODY names the target's body (tests/fuzz/CMakeLists.txt).
#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return kiln::fuzz::KILN_FUZZ_BODY(data, size);
}
