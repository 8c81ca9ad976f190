// A package loads and runs in a process that has no C++ compiler: PATH names no directory,
// KILN_CXX names a compiler that does not exist (kiln then tries no other) and the disk cache is
// off, so every kernel must come from the package. package_app (what an app does) runs each model's
// data sets, at three batch sizes, against PyTorch's outputs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <kiln/kiln.h>

#include "core/onnx/package.h"

namespace kiln::onnx {
namespace {

namespace fs = std::filesystem;

std::string run_command(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return "(popen failed)";
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  *status = pclose(pipe);
  return output;
}

class PackageWithoutCompiler : public ::testing::TestWithParam<const char*> {};

TEST_P(PackageWithoutCompiler, RunsEverySizeFromThePackagesKernels) {
  if (!Device::cpu().backend().codegen()) GTEST_SKIP() << "the cpu backend generates no code here (no C++ compiler)";
  const fs::path case_dir = fs::path(KILN_TEST_MODELS) / GetParam();
  const fs::path dir = fs::temp_directory_path() / (std::string("kiln_package_process_") + GetParam());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string package = (dir / "model.kpkg").string();
  const PackageSummary summary = export_package(import_onnx((case_dir / "model.onnx").string()), Device::cpu(), package);
  ASSERT_GE(summary.kernels, 1u);

  int status = 0;
  const std::string output = run_command(
      "/usr/bin/env -i PATH=/nonexistent KILN_CXX=/nonexistent/c++ KILN_CACHE_DIR=off '" KILN_PACKAGE_APP "' '" +
          package + "' '" + case_dir.string() + "'",
      &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("compiler: unavailable"), std::string::npos) << output;
  EXPECT_NE(output.find("compiles: 0, cache loads: 0"), std::string::npos) << output;
  EXPECT_NE(output.find(", generated"), std::string::npos) << output;
  for (int k = 0; k < 3; ++k)
    EXPECT_NE(output.find("data set " + std::to_string(k) + ", input "), std::string::npos) << output;
  EXPECT_EQ(output.find("MISMATCH"), std::string::npos) << output;
  fs::remove_all(dir);
}

// The command line: `kiln export` with a size hint, then `kiln run` of the package at another
// size, without a compiler, checked against the ref interpreter (exit code 1 past 1e-3).
TEST(KilnCli, ExportThenRunWithoutACompiler) {
  if (!Device::cpu().backend().codegen()) GTEST_SKIP() << "the cpu backend generates no code here (no C++ compiler)";
  const fs::path model = fs::path(KILN_TEST_MODELS) / "gpt2_block_small_dynamic" / "model.onnx";
  const fs::path dir = fs::temp_directory_path() / "kiln_package_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string package = (dir / "gpt2.kpkg").string();
  int status = 0;
  std::string output = run_command(std::string("'" KILN_CLI "' export '") + model.string() + "' -o '" + package +
                                       "' --shape input=2x5x128",
                                   &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("wrote " + package + ": "), std::string::npos) << output;
  output = run_command("/usr/bin/env -i PATH=/nonexistent KILN_CXX=/nonexistent/c++ KILN_CACHE_DIR=off '" KILN_CLI
                       "' run '" + package + "' --backend cpu --compile --shape input=3x7x128",
                       &status);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("package: written by kiln"), std::string::npos) << output;
  EXPECT_NE(output.find("except a package's, which brings its kernels"), std::string::npos) << output;
  output = run_command(std::string("'" KILN_CLI "' run '") + package + "' --input x=y.pb", &status);
  EXPECT_EQ(status, 256) << output;
  EXPECT_NE(output.find("--input does not apply to a package"), std::string::npos) << output;
  fs::remove_all(dir);
}

// A GPT block (attention, layer norms, GELU) and a conv1d net (oneDNN convs beside generated
// kernels), each exported with a dynamic batch.
INSTANTIATE_TEST_SUITE_P(Exported, PackageWithoutCompiler,
                         ::testing::Values("gpt2_block_small_dynamic", "audio_conv1d_dynamic"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace kiln::onnx
