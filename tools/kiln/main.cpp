// kiln: the command line tool. Subcommands: test-onnx, run, bench, export, devices.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/support/error.h"
#include "tools/kiln/cli_util.h"

namespace {

const char* kUsage =
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  test-onnx   run ONNX backend-test cases (model.onnx + test_data_set_N) and compare\n"
    "  run         run an ONNX model eagerly and compiled on each device; compare them\n"
    "  bench       time an ONNX model eager vs compiled; compile time, kernels, memory\n"
    "  export      compile an ONNX model into a package that runs without a compiler\n"
    "  devices     list the devices kiln can run on, best first, and why a backend has none\n"
    "\n"
    "`kiln <command> --help` describes each command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "test-onnx") return kiln::cli::cmd_test_onnx(args);
    if (command == "run") return kiln::cli::cmd_run(args);
    if (command == "bench") return kiln::cli::cmd_bench(args);
    if (command == "devices") return kiln::cli::cmd_devices(args);
    if (command == "export") return kiln::cli::cmd_export(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln %s: %s\n", command.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
