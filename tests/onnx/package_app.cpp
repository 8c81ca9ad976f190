// What an app that ships a kiln package does: load it, compile it for the cpu (binding the package's
// kernels; no compiler runs) and run it. package_test.cpp runs this in a process whose environment
// has no compiler, on every data set of an exported model's folder, against PyTorch's outputs.
//
// usage: package_app PACKAGE CASE_DIR. Prints what ran; exit code 0 when every output is within
// |kiln - torch| <= 1e-4 + 1e-3 |torch| (the ONNX backend tests' tolerance).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include <kiln/kiln.h>

#include "backends/cpu/host_compiler.h"
#include "core/onnx/package.h"
#include "core/runtime/planned_program.h"

namespace fs = std::filesystem;
using namespace kiln;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: package_app PACKAGE CASE_DIR\n");
    return 2;
  }
  try {
    const cpu::HostCompiler& compiler = cpu::HostCompiler::instance();
    std::printf("compiler: %s\n", compiler.available() ? "available" : ("unavailable (" + compiler.why_not() + ")").c_str());
    const onnx::Package package = onnx::read_package(argv[1]);
    onnx::CompiledModel compiled(package.model, Device::cpu());
    const cpu::CompileCounts counts = cpu::HostCompiler::counts();
    std::printf("compiles: %d, cache loads: %d\n", counts.compiled, counts.loaded);
    const bool generated = dynamic_cast<PlannedProgram*>(&compiled.program()) != nullptr;
    std::printf("program: %lld kernels, %s\n", static_cast<long long>(compiled.program().stats().kernels),
                generated ? "generated" : "interpreted");
    bool ok = true;
    for (int k = 0;; ++k) {
      const fs::path set = fs::path(argv[2]) / ("test_data_set_" + std::to_string(k));
      if (!fs::exists(set)) break;
      const Literal input = onnx::read_tensor_file((set / "input_0.pb").string());
      const std::vector<Tensor> outputs = compiled.run({onnx::literal_to_tensor(input, Device::cpu())});
      double worst = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        const Literal want = onnx::read_tensor_file((set / ("output_" + std::to_string(i) + ".pb")).string());
        const std::vector<float> got = outputs[i].to_vector<float>();
        if (outputs[i].sizes() != want.shape) {
          worst = INFINITY;
          continue;
        }
        for (size_t e = 0; e < got.size(); ++e) {
          const double w = want.element(int64_t(e));
          worst = std::max(worst, std::abs(double(got[e]) - w) - 1e-3 * std::abs(w));
        }
      }
      std::string sizes;
      for (int64_t d : input.shape) sizes += (sizes.empty() ? "" : "x") + std::to_string(d);
      std::printf("data set %d, input %s: %s (worst excess over the tolerance %.3g)\n", k, sizes.c_str(),
                  worst <= 1e-4 ? "ok" : "MISMATCH", worst);
      ok = ok && worst <= 1e-4;
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
