// The fuzz targets this build has, by name.
#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = {
      {"onnx_import", onnx_import},
      {"tensor_proto", tensor_proto},
      {"ir_text", ir_text},
      {"symint", symint},
#ifdef KILN_FUZZ_HAVE_DEBUGGER
      {"bundle", bundle},
#endif
  };
  return targets;
}

}  // namespace kiln::fuzz
