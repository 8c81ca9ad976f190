// The bad-input matrix for models: each malformed model or wrong run-time input is a kiln::Error
// that names what is wrong and where, and the process stays usable (the next good call works).
// RELIABILITY.md lists the matrix; truncated files, missing external data, shape conflicts and
// unsupported ops are covered in onnx_import_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/frontend/factories.h"
#include "core/onnx/onnx_import.h"
#include "onnx/model_builder.h"

namespace kiln::onnx {
namespace {

// Runs `body`, which must throw a kiln::Error whose message holds every one of `parts`.
void expect_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one naming " << parts.at(0);
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' missing from: " << e.what();
  }
}

std::string relu_model(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<std::string>& params = {}) {
  ModelBuilder b;
  b.input("x", dims, params);
  b.node("Relu", "act", {"x"}, {"y"});
  b.output("y");
  return b.save(temp_dir(name));
}

// --- run-time inputs --------------------------------------------------------------------------

class RunTimeInputs : public ::testing::TestWithParam<bool> {  // false: EagerModel, true: compiled
 protected:
  std::vector<Tensor> run(const ImportedModel& m, const std::vector<Tensor>& inputs) {
    if (GetParam()) return CompiledModel(m, Device::cpu()).run(inputs);
    return EagerModel(m, Device::cpu()).run(inputs);
  }
};

TEST_P(RunTimeInputs, WrongCountDtypeRankOrSizeNamesTheInputAndTheNextRunWorks) {
  ImportedModel m = import_onnx(relu_model("inputs", {2, 3}));
  const Tensor good = from_vector<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  expect_error([&] { run(m, {}); }, {"1 input", "0 were given"});
  expect_error([&] { run(m, {good, good}); }, {"1 input", "2 were given"});
  expect_error([&] { run(m, {full({2, 3}, 1, DType::I64)}); }, {"'x'", "f32[2,3]", "i64[2,3]"});
  expect_error([&] { run(m, {full({6}, 1.0f)}); }, {"'x'", "f32[2,3]", "f32[6]"});
  expect_error([&] { run(m, {full({2, 4}, 1.0f)}); }, {"'x'", "dim 1", "4", "3"});
  EXPECT_EQ(run(m, {good}).at(0).to_vector<float>(), (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

TEST_P(RunTimeInputs, SymbolicDimsTakeAnySizeButStaticDimsAndSharedSymbolsAreChecked) {
  ModelBuilder b;
  b.input("a", {0, 3}, {"batch"});
  b.input("b", {0, 3}, {"batch"});
  b.node("Add", "add", {"a", "b"}, {"y"});
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("symbolic_inputs")));
  EXPECT_EQ(run(m, {full({5, 3}, 1.0f), full({5, 3}, 2.0f)}).at(0).sizes(), (std::vector<int64_t>{5, 3}));
  expect_error([&] { run(m, {full({5, 2}, 1.0f), full({5, 2}, 2.0f)}); }, {"'a'", "dim 1", "3"});
  // 'batch' is 5 in a and 4 in b.
  expect_error([&] { run(m, {full({5, 3}, 1.0f), full({4, 3}, 2.0f)}); }, {"'b'", "batch", "5", "4"});
  EXPECT_EQ(run(m, {full({2, 3}, 1.0f), full({2, 3}, 2.0f)}).at(0).to_vector<float>(),
            std::vector<float>(6, 3.0f));
}

// A value or shape for a name the model does not have (kiln run --input nosuch=x.pb) is refused
// with the model's input names, not ignored.
TEST(RunTimeInputNames, AValueOrShapeForAnUnknownInputNamesTheModelsInputs) {
  const std::string path = relu_model("input_names", {0, 3}, {"batch"});
  ImportOptions values;
  values.input_values["nosuch"] = Literal{DType::F32, {2, 3}, std::vector<uint8_t>(24)};
  expect_error([&] { import_onnx(path, values); }, {"a value given for 'nosuch'", "its inputs are 'x'"});
  ImportOptions shapes;
  shapes.input_shapes["X"] = {2, 3};
  expect_error([&] { import_onnx(path, shapes); }, {"a shape given for 'X'", "'x'"});
  shapes.input_shapes = {{"x", {2, 3}}};
  EXPECT_EQ(import_onnx(path, shapes).inputs.at(0).name, "x");
}

INSTANTIATE_TEST_SUITE_P(EagerAndCompiled, RunTimeInputs, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "compiled" : "eager"; });

// --- model files ------------------------------------------------------------------------------

TEST(BadModel, InitializerSizesPastInt64OrDataShorterThanDeclaredAreErrors) {
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}, {int64_t(1) << 62, 4}}) {
    ModelBuilder b;
    b.input("x", {1});
    b.init("huge", dims, {1.0f});
    b.node("Mul", "scale", {"x", "huge"}, {"y"});
    b.output("y");
    expect_error([&] { import_onnx(b.save(temp_dir("huge_init"))); }, {"huge"});
  }
  ModelBuilder b;
  b.input("x", {3});
  b.init("w", {3}, {1.0f, 2.0f});  // 2 values for 3 elements
  b.node("Mul", "scale", {"x", "w"}, {"y"});
  b.output("y");
  expect_error([&] { import_onnx(b.save(temp_dir("short_init"))); }, {"'w'", "3"});
}

TEST(BadModel, NegativeDimsAreErrorsAndZeroDimsRunEmpty) {
  expect_error([] { import_onnx(relu_model("negative_dim", {2, -3})); }, {"'x'", "-3"});
  ModelBuilder b;
  b.input("x", {1});
  b.init("w", {-1}, {});
  b.node("Mul", "scale", {"x", "w"}, {"y"});
  b.output("y");
  expect_error([&] { import_onnx(b.save(temp_dir("negative_init"))); }, {"'w'", "-1"});
  ImportedModel empty = import_onnx(relu_model("zero_dim", {0, 3}));
  for (bool compiled : {false, true}) {
    std::vector<Tensor> out = compiled ? CompiledModel(empty, Device::cpu()).run({full({0, 3}, 1.0f)})
                                       : run_model(empty, {full({0, 3}, 1.0f)}, Device::cpu());
    EXPECT_EQ(out.at(0).sizes(), (std::vector<int64_t>{0, 3}));
  }
}

TEST(BadModel, ACycleOrAValueNothingProducesNamesTheNodeAndTheValue) {
  ModelBuilder cyclic;
  cyclic.input("x", {2});
  cyclic.node("Add", "first", {"x", "z"}, {"w"});
  cyclic.node("Relu", "second", {"w"}, {"z"});
  cyclic.output("z");
  expect_error([&] { import_onnx(cyclic.save(temp_dir("cycle"))); }, {"'z'"});
  ModelBuilder missing;
  missing.input("x", {2});
  missing.node("Mul", "scale", {"x", "weights"}, {"y"});
  missing.output("y");
  expect_error([&] { import_onnx(missing.save(temp_dir("missing_init"))); }, {"'weights'", "scale"});
  // Nothing is left behind: the next import and run work.
  ImportedModel m = import_onnx(relu_model("after_errors", {2}));
  EXPECT_EQ(run_model(m, {from_vector<float>({-1, 1})}, Device::cpu()).at(0).to_vector<float>(),
            (std::vector<float>{0, 1}));
}

// A chain deeper than any recursive walk over the graph could follow on an 8 MiB stack.
TEST(BadModel, AChainOfFiftyThousandNodesImportsCompilesAndRuns) {
  constexpr int kDepth = 50000;
  ModelBuilder b;
  b.input("x", {4});
  b.init("one", {1}, {1.0f});
  std::string last = "x";
  for (int i = 0; i < kDepth; ++i) {
    const std::string next = "v" + std::to_string(i);
    b.node(i % 2 ? "Add" : "Sub", "n" + std::to_string(i), {last, "one"}, {next});
    last = next;
  }
  b.node("Identity", "out", {last}, {"y"});
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("deep")));
  const Tensor x = from_vector<float>({1, 2, 3, 4});
  EXPECT_EQ(run_model(m, {x}, Device::cpu()).at(0).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(CompiledModel(m, Device::cpu()).run({x}).at(0).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace kiln::onnx
