// kiln export: compiles an ONNX model for one device and writes it as a package, which `kiln run`,
// `kiln bench` and onnx::read_package load where no compiler is installed (core/onnx/package.h).
#include <cstdio>
#include <string>
#include <vector>

#include "core/support/error.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/model_session.h"

#ifdef KILN_HAVE_ONNX
#include "core/onnx/package.h"
#endif

namespace kiln::cli {

namespace {

const char* kHelp =
    "usage: kiln export MODEL.onnx -o MODEL.kpkg [--backend cpu|vulkan|cuda] [--mode M]\n"
    "                   [--shape name=4x3x224x224 | symbol=4 ...]\n"
    "\n"
    "Imports MODEL.onnx, compiles it for one device (default cpu) and writes a package: the graph,\n"
    "its weights, its shape guards and, on cpu, the shared objects of its generated kernels.\n"
    "`kiln run MODEL.kpkg` and `kiln bench MODEL.kpkg` load it on a machine without a C++\n"
    "compiler; its cpu kernels need a CPU with the features of the one that exported it.\n"
    "--shape sets the symbolic dims' hints, as for `kiln run`; the package serves every size.\n"
    "  -o, --output FILE  where to write the package\n";

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  ModelOptions options;
  std::string output;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s%s", kHelp, ModelOptions::help());
      return 0;
    } else if ((a == "-o" || a == "--output") && i + 1 < args.size()) {
      output = args[++i];
    } else if (!options.parse(args, i)) {
      std::fprintf(stderr, "kiln export: unexpected argument '%s'\n\n%s%s", a.c_str(), kHelp, ModelOptions::help());
      return 2;
    }
  }
  if (options.model_path.empty() || output.empty()) {
    std::fprintf(stderr, "kiln export: give MODEL.onnx and -o FILE\n\n%s%s", kHelp, ModelOptions::help());
    return 2;
  }
#ifndef KILN_HAVE_ONNX
  throw_without_onnx();
#else
  const std::vector<Device> devices = parse_backends(options.backend);
  if (devices.size() != 1) throw Error("kiln export: --backend names one device, got '" + options.backend + "'");
  LoadedModel loaded = load_model(options, [](const std::string& line) { std::printf("%s\n", line.c_str()); });
  const onnx::PackageSummary summary =
      onnx::export_package(loaded.model, devices[0], output, program_options(options.mode));
  std::printf("wrote %s: %zu bytes for %s, %zu weights, %zu compiled kernels in %zu objects\n", output.c_str(),
              summary.bytes, devices[0].name().c_str(), summary.weights, summary.kernels, summary.artifacts);
  return 0;
#endif
}

}  // namespace kiln::cli
