// kiln packages (core/onnx/package.h) in one process: what is written reads back as it was, loading
// binds the package's kernels instead of compiling, and damaged files or kernels for another CPU
// are refused with the reason. package_process_test.cpp runs one where no compiler is installed.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include <kiln/kiln.h>

#include "backends/cpu/host_compiler.h"
#include "core/ir/text.h"
#include "core/onnx/package.h"
#include "core/runtime/planned_program.h"
#include "onnx/model_builder.h"

namespace kiln::onnx {
namespace {

// y = softmax(tanh(x W + b)) with x [batch, 8]: a oneDNN matmul, then generated kernels.
ImportedModel small_model(const fs::path& dir) {
  ModelBuilder m;
  m.input("x", {1, 8}, {"batch", ""});
  std::vector<float> w(8 * 16), b(16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * float(int(i % 13) - 6);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * float(i % 5);
  m.init("W", {8, 16}, w);
  m.init("B", {16}, b);
  m.node("MatMul", "mm", {"x", "W"}, {"xw"});
  m.node("Add", "add", {"xw", "B"}, {"h"});
  m.node("Tanh", "tanh", {"h"}, {"t"});
  ModelBuilder::attr_int(m.node("Softmax", "softmax", {"t"}, {"y"}), "axis", -1);
  m.output("y");
  return import_onnx(m.save(dir));
}

bool cpu_generates_code() { return Device::cpu().backend().codegen().has_value(); }

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
}

std::string error_of(const std::string& path) {
  try {
    read_package(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Package, ReadsBackWhatWasWritten) {
  const fs::path dir = temp_dir("package_round_trip");
  const ImportedModel model = small_model(dir);
  const std::string path = (dir / "model.kpkg").string();
  const PackageSummary summary = export_package(model, Device::cpu(), path);
  EXPECT_TRUE(is_package(path));
  EXPECT_FALSE(is_package((dir / "model.onnx").string()));
  EXPECT_EQ(summary.bytes, fs::file_size(path));
  EXPECT_EQ(summary.weights, 2u);

  const Package package = read_package(path);
  EXPECT_EQ(package.device, "cpu");
  EXPECT_EQ(package.kiln.rfind("kiln ", 0), 0u) << package.kiln;
  EXPECT_EQ(print_graph(package.model.graph), print_graph(model.graph));
  ASSERT_EQ(package.model.inputs.size(), 1u);
  EXPECT_EQ(package.model.inputs[0].name, "x");
  EXPECT_EQ(package.model.inputs[0].type.str(), "f32[batch,8]");
  ASSERT_EQ(package.model.outputs.size(), 1u);
  EXPECT_EQ(package.model.outputs[0].name, "y");
  EXPECT_EQ(package.model.opset, model.opset);
  ASSERT_EQ(package.model.captured.size(), model.captured.size());
  for (size_t i = 0; i < model.captured.size(); ++i)
    EXPECT_EQ(package.model.captured[i].to_vector<float>(), model.captured[i].to_vector<float>()) << "weight " << i;
  ASSERT_TRUE(package.model.artifacts);
  if (cpu_generates_code()) {
    EXPECT_EQ(package.model.artifacts->size(), summary.artifacts);
    EXPECT_GE(summary.kernels, 1u);
    for (const Artifact& a : package.model.artifacts->all()) {
      EXPECT_EQ(a.kind, "cpu-so");
      EXPECT_EQ(a.target, cpu::HostCompiler::cpu_features());
      EXPECT_EQ(std::memcmp(a.bytes.data(), "\x7f" "ELF", 4), 0) << "not a shared object";
    }
  } else {
    EXPECT_EQ(summary.artifacts, 0u);
  }
}

// The loaded program runs the package's shared objects: no compiler run, no disk cache entry
// loaded, and the outputs of the program compiled from the ONNX file, bit for bit, at every batch.
TEST(Package, LoadingBindsThePackagesKernels) {
  if (!cpu_generates_code()) GTEST_SKIP() << "the cpu backend generates no code here (no C++ compiler)";
  const fs::path dir = temp_dir("package_binds");
  const ImportedModel model = small_model(dir);
  const std::string path = (dir / "model.kpkg").string();
  export_package(model, Device::cpu(), path);
  CompiledModel original(model, Device::cpu());

  const Package package = read_package(path);
  const cpu::CompileCounts before = cpu::HostCompiler::counts();
  CompiledModel loaded(package.model, Device::cpu());
  const cpu::CompileCounts after = cpu::HostCompiler::counts();
  EXPECT_EQ(after.compiled, before.compiled) << "loading ran the compiler";
  EXPECT_EQ(after.loaded, before.loaded) << "loading read the disk cache";
  EXPECT_NE(dynamic_cast<PlannedProgram*>(&loaded.program()), nullptr) << "loading fell back to the interpreter";
  for (int64_t batch : {1, 3, 17}) {
    const Tensor x = randn({batch, 8}, Device::cpu(), uint64_t(batch));
    const std::vector<float> got = loaded.run({x})[0].to_vector<float>();
    EXPECT_EQ(got, original.run({x})[0].to_vector<float>()) << "batch " << batch;
    const std::vector<float> want = run_model(model, {x.to(Device::ref())}, Device::ref())[0].to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "batch " << batch << ", element " << i;
  }
}

// Kernels compiled for features this CPU lacks would die of an illegal instruction; they are
// refused by name before they load.
TEST(Package, KernelsForAnotherCpuAreRefused) {
  if (!cpu_generates_code()) GTEST_SKIP() << "the cpu backend generates no code here (no C++ compiler)";
  const fs::path dir = temp_dir("package_other_cpu");
  const std::string path = (dir / "model.kpkg").string();
  export_package(small_model(dir), Device::cpu(), path);
  Package package = read_package(path);
  auto other = std::make_shared<ArtifactSet>();
  for (Artifact a : package.model.artifacts->all()) {
    a.target += " kiln_test_feature";
    other->add(std::move(a));
  }
  package.model.artifacts = other;
  try {
    CompiledModel loaded(package.model, Device::cpu());
    FAIL() << "kernels for another CPU loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiled for a CPU with kiln_test_feature, which this one lacks"), std::string::npos)
        << e.what();
  }
}

TEST(Package, DamagedFilesAreRefusedWithTheReason) {
  const fs::path dir = temp_dir("package_damaged");
  const std::string path = (dir / "model.kpkg").string();
  export_package(small_model(dir), Device::cpu(), path);
  const std::string good = read_all(path);
  const std::string bad = (dir / "bad.kpkg").string();
  auto expect_refused = [&](const std::string& data, const std::string& reason) {
    write_all(bad, data);
    const std::string message = error_of(bad);
    EXPECT_NE(message.find("kiln package '" + bad + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(reason), std::string::npos) << message;
  };
  expect_refused(good.substr(0, good.size() / 2), "checksum does not match");
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  expect_refused(flipped, "checksum does not match");
  expect_refused("KILNPKG", "not a kiln package");
  expect_refused(std::string("KILNPKG\0", 8) + "\x01", "truncated");
  expect_refused(read_all(dir / "model.onnx"), "not a kiln package");
  std::string future = good;
  future[8] = 99;
  expect_refused(future, "format 99, this kiln reads format 1");
  EXPECT_NE(error_of((dir / "missing.kpkg").string()).find("cannot open it"), std::string::npos);
}

}  // namespace
}  // namespace kiln::onnx
