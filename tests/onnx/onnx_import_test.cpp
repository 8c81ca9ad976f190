// ONNX importer tests: models written here with the protobuf API, run on cpu and checked against
// hand-computed values or kiln's own ops called directly; error paths (unsupported ops listed
// together, truncated files, missing external data, shape conflicts) raise kiln::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/frontend/factories.h"
#include "core/frontend/ops.h"
#include "core/onnx/onnx_import.h"
#include "onnx/model_builder.h"

namespace kiln::onnx {
namespace {

std::vector<float> run_f32(const ImportedModel& m, const std::vector<Tensor>& in) {
  return run_model(m, in, Device::cpu()).at(0).to_vector<float>();
}

TEST(OnnxImport, GemmReluMatchesHandComputedValuesAndWeightsAreCaptured) {
  ModelBuilder b;
  b.input("x", {1, 2});
  b.init("W", {2, 2}, {1, -1, 2, 0.5f});
  b.init("bias", {2}, {0.5f, -10});
  b.node("Gemm", "fc", {"x", "W", "bias"}, {"h"});
  b.node("Relu", "act", {"h"}, {"y"});
  b.output("y");
  const std::string path = b.save(temp_dir("gemm"));
  ImportedModel m = import_onnx(path);
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.captured.size(), 2u);  // W and bias are graph inputs bound to tensors
  EXPECT_EQ(m.graph.inputs().size(), 3u);
  // x = [3, 4]: x @ W = [3 + 8, -3 + 2] = [11, -1]; + bias = [11.5, -11]; relu = [11.5, 0].
  std::vector<float> y = run_f32(m, {from_vector<float>({3, 4}, {1, 2})});
  EXPECT_EQ(y, (std::vector<float>{11.5f, 0.0f}));
  bool saw_gemm = false;
  for (const Node* n : m.graph.nodes())
    if (n->kind == OpKind::Gemm) {
      saw_gemm = true;
      ASSERT_EQ(n->provenance.origins.size(), 1u);
      EXPECT_EQ(n->provenance.origins[0].imported, "fc (Gemm)");
    }
  EXPECT_TRUE(saw_gemm);
}

TEST(OnnxImport, ConvAutoPadSameUpperEqualsExplicitPaddingOnCpu) {
  ModelBuilder b;
  b.input("x", {1, 1, 5, 5});
  std::vector<float> w(9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i) - 4;
  b.init("w", {1, 1, 3, 3}, w);
  auto* conv = b.node("Conv", "c", {"x", "w"}, {"y"});
  ModelBuilder::attr_string(conv, "auto_pad", "SAME_UPPER");
  ModelBuilder::attr_ints(conv, "strides", {2, 2});
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("conv")));
  Tensor x = randn({1, 1, 5, 5}, Device::cpu(), 7);
  // SAME_UPPER, 5 wide, stride 2, kernel 3: out 3, total pad 2 -> 1 before, 1 after.
  Tensor want = conv2d(x, from_vector<float>(w, {1, 1, 3, 3}), Tensor(), {2, 2}, {1, 1});
  std::vector<float> got = run_f32(m, {x});
  std::vector<float> ref = want.to_vector<float>();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5) << i;
}

TEST(OnnxImport, SymbolicBatchDimRunsWithAnyBatch) {
  ModelBuilder b;
  b.input("x", {0, 3}, {"batch_size"});
  b.node("Sigmoid", "s", {"x"}, {"y"});
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("sym")));
  EXPECT_FALSE(m.inputs[0].type.shape[0].is_static());
  EXPECT_EQ(m.inputs[0].type.shape[0].str(), "batch_size");
  for (int64_t batch : {1, 4}) {
    std::vector<float> y = run_f32(m, {zeros({batch, 3})});
    EXPECT_EQ(y, std::vector<float>(size_t(batch * 3), 0.5f));
  }
}

TEST(OnnxImport, UnsupportedOpsAreAllListedWithNodeNames) {
  ModelBuilder b;
  b.input("x", {2});
  b.node("Frobnicate", "first_bad", {"x"}, {"a"});
  b.node("Relu", "fine", {"a"}, {"r"});
  b.node("Zorble", "second_bad", {"r"}, {"y"});
  b.output("y");
  try {
    import_onnx(b.save(temp_dir("unsupported")));
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Frobnicate ('first_bad')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Zorble ('second_bad')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 unsupported items"), std::string::npos) << msg;
  }
}

TEST(OnnxImport, EveryTruncationOfAModelIsAnErrorOrAValidModelNeverACrash) {
  ModelBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.init("w", {3, 2, 3, 3}, std::vector<float>(54, 0.25f));
  b.init("bias", {3}, {1, 2, 3});
  auto* c = b.node("Conv", "conv", {"x", "w", "bias"}, {"h"});
  ModelBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
  b.node("Relu", "relu", {"h"}, {"y"});
  b.output("y", {1, 3, 4, 4});
  const fs::path dir = temp_dir("truncated");
  std::string bytes;
  b.model.SerializeToString(&bytes);
  const std::string path = (dir / "cut.onnx").string();
  int errors = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(len));
    try {
      ImportedModel m = import_onnx(path);
      run_model(m, {zeros({1, 2, 4, 4})}, Device::cpu());
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, int(bytes.size()) / 2);
}

TEST(OnnxImport, RealTestModelTruncatedRaisesKilnError) {
  const fs::path model = "/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "libonnx-testdata not installed";
  std::ifstream in(model, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string path = (temp_dir("real_cut") / "m.onnx").string();
  for (size_t len : {size_t(0), size_t(1), bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(len));
    EXPECT_THROW(import_onnx(path), Error) << "length " << len;
  }
}

TEST(OnnxImport, ExternalDataIsReadRelativeToTheModelAndMissingDataIsAnError) {
  const fs::path dir = temp_dir("external");
  ModelBuilder b;
  b.input("x", {3});
  P* w = b.g->add_initializer();
  w->set_name("w");
  w->set_data_type(P::FLOAT);
  w->add_dims(3);
  w->set_data_location(P::EXTERNAL);
  auto kv = [&](const std::string& k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "4");
  kv("length", "12");
  b.node("Mul", "scale", {"x", "w"}, {"y"});
  b.output("y");
  const std::string path = b.save(dir);
  EXPECT_THROW(
      {
        try {
          import_onnx(path);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("weights.bin"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  const float data[4] = {99, 2, 3, 4};  // the first float is skipped by offset 4
  std::ofstream(dir / "weights.bin", std::ios::binary).write(reinterpret_cast<const char*>(data), 16);
  ImportedModel m = import_onnx(path);
  EXPECT_EQ(run_f32(m, {from_vector<float>({1, 1, 2})}), (std::vector<float>{2, 3, 8}));
  std::ofstream(dir / "weights.bin", std::ios::binary | std::ios::trunc).write("ab", 2);
  EXPECT_THROW(import_onnx(path), Error);  // too short for offset + length
}

TEST(OnnxImport, DeclaredOutputShapeConflictIsAnError) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.node("Relu", "r", {"x"}, {"y"});
  b.output("y", {3, 2});
  try {
    import_onnx(b.save(temp_dir("conflict")));
    FAIL() << "expected a shape conflict";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape conflict"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, InputValueOfWrongShapeIsAShapeConflict) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.node("Relu", "r", {"x"}, {"y"});
  b.output("y");
  ImportOptions options;
  options.input_values["x"] = Literal{DType::F32, {4, 3}, std::vector<uint8_t>(48)};
  EXPECT_THROW(import_onnx(b.save(temp_dir("conflict2")), options), Error);
}

TEST(OnnxImport, OpsetOutsideSevenToSeventeenIsUnsupported) {
  ModelBuilder b(18);
  b.input("x", {2});
  b.node("Relu", "r", {"x"}, {"y"});
  b.output("y");
  EXPECT_THROW(import_onnx(b.save(temp_dir("opset"))), UnsupportedError);
}

TEST(OnnxImport, ReshapeShapeFromAGraphInputNeedsItsValue) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.io(true, "shape", P::INT64, {2});
  b.node("Reshape", "rs", {"x", "shape"}, {"y"});
  b.output("y");
  const std::string path = b.save(temp_dir("reshape_input"));
  EXPECT_THROW(import_onnx(path), UnsupportedError);
  ImportOptions options;
  const int64_t dims[2] = {3, -1};
  options.input_values["shape"] = Literal{DType::I64, {2}, std::vector<uint8_t>(
      reinterpret_cast<const uint8_t*>(dims), reinterpret_cast<const uint8_t*>(dims) + 16)};
  ImportedModel m = import_onnx(path, options);
  ASSERT_EQ(m.inputs.size(), 1u);  // `shape` became a constant
  EXPECT_EQ(m.outputs[0].type.str(), "f32[3,2]");
}

TEST(OnnxImport, ShapeGatherConcatFoldsIntoTheReshapeAttribute) {
  ModelBuilder b;
  b.input("x", {2, 3, 4});
  b.init_i64("idx0", {0});
  b.init_i64("minus1", {-1});
  b.node("Shape", "shape", {"x"}, {"s"});
  auto* gather = b.node("Gather", "first", {"s", "idx0"}, {"d0"});
  ModelBuilder::attr_int(gather, "axis", 0);
  auto* cat = b.node("Concat", "cat", {"d0", "minus1"}, {"target"});
  ModelBuilder::attr_int(cat, "axis", 0);
  b.node("Reshape", "flat", {"x", "target"}, {"y"});
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("fold")));
  EXPECT_EQ(m.outputs[0].type.str(), "f32[2,12]");
  ASSERT_EQ(m.graph.num_nodes(), 1u);  // only the reshape is left
  EXPECT_EQ(m.graph.nodes()[0]->kind, OpKind::Reshape);
  EXPECT_TRUE(m.captured.empty());
}

TEST(OnnxImport, SoftmaxBeforeOpset13NormalizesOverTheFlattenedTail) {
  for (int64_t opset : {11, 13}) {
    ModelBuilder b(opset);
    b.input("x", {1, 2, 2});
    auto* s = b.node("Softmax", "sm", {"x"}, {"y"});
    ModelBuilder::attr_int(s, "axis", 1);
    b.output("y");
    ImportedModel m = import_onnx(b.save(temp_dir("softmax" + std::to_string(opset))));
    std::vector<float> y = run_f32(m, {zeros({1, 2, 2})});
    // opset 11: one softmax over all 4 elements; opset 13: over the 2 along axis 1.
    const float want = opset == 11 ? 0.25f : 0.5f;
    for (float v : y) EXPECT_NEAR(v, want, 1e-6);
  }
}

TEST(OnnxImport, NotAModelFileIsAnError) {
  const fs::path dir = temp_dir("garbage");
  std::ofstream(dir / "bad.onnx") << "this is not a protobuf \xff\xff\xff";
  EXPECT_THROW(import_onnx((dir / "bad.onnx").string()), Error);
  EXPECT_THROW(import_onnx((dir / "missing.onnx").string()), Error);
}

// Resize/Upsample, Einsum, TopK and scatters are decompositions; these check them against values
// worked out by hand from the ONNX reference's formulas.
void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << i;
}

TEST(OnnxImport, ResizeLinearHalfPixelMatchesHandInterpolation) {
  ModelBuilder b;
  b.input("x", {1, 1, 1, 2});
  b.init("scales", {4}, {1, 1, 1, 2});
  auto* r = b.node("Resize", "up", {"x", "", "scales"}, {"y"});
  ModelBuilder::attr_string(r, "mode", "linear");
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("resize_linear")));
  // Output x maps to (x + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25; edges clamp to the end pixels.
  expect_near_all(run_f32(m, {from_vector<float>({1, 3}, {1, 1, 1, 2})}), {1, 1.5f, 2.5f, 3});
}

TEST(OnnxImport, UpsampleNearestRepeatsPixels) {
  ModelBuilder b(9);
  b.input("x", {1, 1, 2, 2});
  b.init("scales", {4}, {1, 1, 2, 3});
  b.node("Upsample", "up", {"x", "scales"}, {"y"});
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("upsample")));
  std::vector<float> y = run_f32(m, {from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2})});
  expect_near_all(y, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST(OnnxImport, ResizeWithScalesAndSizesIsAnError) {
  ModelBuilder b;
  b.input("x", {1, 1, 2, 2});
  b.init("scales", {4}, {1, 1, 2, 2});
  b.init_i64("sizes", {1, 1, 4, 4});
  b.node("Resize", "bad", {"x", "", "scales", "sizes"}, {"y"});
  b.output("y");
  EXPECT_THROW(import_onnx(b.save(temp_dir("resize_bad"))), Error);
}

TEST(OnnxImport, EinsumMatmulAndDiagonalMatchHandValues) {
  ModelBuilder b;
  b.input("a", {2, 2});
  b.input("c", {2, 2});
  auto* mm = b.node("Einsum", "mm", {"a", "c"}, {"y"});
  ModelBuilder::attr_string(mm, "equation", "ij,jk->ik");
  auto* dg = b.node("Einsum", "dg", {"a"}, {"d"});
  ModelBuilder::attr_string(dg, "equation", "ii->i");
  b.output("y");
  b.output("d");
  ImportedModel m = import_onnx(b.save(temp_dir("einsum")));
  std::vector<Tensor> out = run_model(m, {from_vector<float>({1, 2, 3, 4}, {2, 2}),
                                          from_vector<float>({5, 6, 7, 8}, {2, 2})}, Device::cpu());
  expect_near_all(out.at(0).to_vector<float>(), {19, 22, 43, 50});
  expect_near_all(out.at(1).to_vector<float>(), {1, 4});
}

TEST(OnnxImport, EinsumWithThreeOperandsIsUnsupported) {
  ModelBuilder b;
  b.input("a", {2});
  auto* e = b.node("Einsum", "three", {"a", "a", "a"}, {"y"});
  ModelBuilder::attr_string(e, "equation", "i,i,i->");
  b.output("y");
  EXPECT_THROW(import_onnx(b.save(temp_dir("einsum3"))), UnsupportedError);
}

TEST(OnnxImport, TopKReturnsSortedValuesAndFirstIndexOnTies) {
  ModelBuilder b;
  b.input("x", {1, 5});
  b.init_i64("k", {3});
  b.node("TopK", "top", {"x", "k"}, {"v", "i"});
  b.output("v");
  b.io(false, "i", P::INT64, {1, 3});
  ImportedModel m = import_onnx(b.save(temp_dir("topk")));
  std::vector<Tensor> out = run_model(m, {from_vector<float>({3, 9, 1, 9, 5}, {1, 5})}, Device::cpu());
  expect_near_all(out.at(0).to_vector<float>(), {9, 9, 5});
  EXPECT_EQ(out.at(1).to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 4}));
}

TEST(OnnxImport, ScatterElementsAddAccumulatesDuplicateIndices) {
  ModelBuilder b(16);
  b.input("data", {1, 5});
  b.io(true, "idx", P::INT64, {1, 3});
  b.input("upd", {1, 3});
  auto* s = b.node("ScatterElements", "sc", {"data", "idx", "upd"}, {"y"});
  ModelBuilder::attr_int(s, "axis", 1);
  ModelBuilder::attr_string(s, "reduction", "add");
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("scatter")));
  std::vector<float> y = run_f32(m, {from_vector<float>({1, 2, 3, 4, 5}, {1, 5}),
                                     from_vector<int64_t>({1, 1, -1}, {1, 3}),
                                     from_vector<float>({10, 20, 30}, {1, 3})});
  expect_near_all(y, {1, 32, 3, 4, 35});
}

TEST(OnnxImport, PoolingPadsWiderThanHalfTheWindowMatchHandValues) {
  // Width 3 padded by 2 each side, windows of 3: the edge windows hold one real element.
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"AveragePool", 0}, {"AveragePool", 1}, {"MaxPool", 0}};
  const std::vector<std::vector<float>> want = {
      {1, 1.5f, 2, 2.5f, 3}, {1.0f / 3, 1, 2, 5.0f / 3, 1}, {1, 2, 3, 3, 3}};
  for (size_t c = 0; c < cases.size(); ++c) {
    ModelBuilder b;
    b.input("x", {1, 1, 1, 3});
    auto* p = b.node(cases[c].first, "pool", {"x"}, {"y"});
    ModelBuilder::attr_ints(p, "kernel_shape", {1, 3});
    ModelBuilder::attr_ints(p, "pads", {0, 2, 0, 2});
    if (cases[c].first == "AveragePool") ModelBuilder::attr_int(p, "count_include_pad", cases[c].second);
    b.output("y");
    ImportedModel m = import_onnx(b.save(temp_dir("widepool" + std::to_string(c))));
    expect_near_all(run_f32(m, {from_vector<float>({1, 2, 3}, {1, 1, 1, 3})}), want[c]);
  }
}

TEST(OnnxImport, MatMulIntegerAndDequantizeSubtractZeroPointsExactly) {
  ModelBuilder b;
  b.io(true, "a", P::UINT8, {1, 2});
  b.io(true, "w", P::UINT8, {2, 1});
  b.io(true, "za", P::UINT8, {});
  b.node("MatMulInteger", "mm", {"a", "w", "za"}, {"y"});
  b.io(false, "y", P::INT32, {1, 1});
  b.input("scale", {});
  b.node("DequantizeLinear", "dq", {"a", "scale", "za"}, {"d"});
  b.output("d");
  ImportedModel m = import_onnx(b.save(temp_dir("integer")));
  std::vector<Tensor> out = run_model(
      m, {from_vector<uint8_t>({200, 7}, {1, 2}), from_vector<uint8_t>({3, 255}, {2, 1}),
          from_vector<uint8_t>({10}, Dims{}), from_vector<float>({0.5f}, Dims{})}, Device::cpu());
  // (200 - 10) * 3 + (7 - 10) * 255 = 570 - 765 = -195; (200 - 10) * 0.5 = 95, (7 - 10) * 0.5 = -1.5.
  EXPECT_EQ(out.at(0).to_vector<int32_t>(), (std::vector<int32_t>{-195}));
  expect_near_all(out.at(1).to_vector<float>(), {95, -1.5f});
}

// The reverse direction visits t = 2, 1, 0 and Y keeps time order; clip bounds every
// pre-activation. Oracle: the ONNX RNN recurrence evaluated here in double precision.
TEST(OnnxImport, RnnReverseWithClipAndInitialStateMatchesTheRecurrence) {
  ModelBuilder b(14);
  b.input("x", {3, 1, 1});
  b.init("W", {1, 1, 1}, {2});
  b.init("R", {1, 1, 1}, {0.5f});
  b.init("B", {1, 2}, {0.1f, 0.2f});
  b.init("h0", {1, 1, 1}, {0.3f});
  auto* n = b.node("RNN", "rnn", {"x", "W", "R", "B", "", "h0"}, {"y", "y_h"});
  ModelBuilder::attr_int(n, "hidden_size", 1);
  ModelBuilder::attr_string(n, "direction", "reverse");
  auto* clip = n->add_attribute();
  clip->set_name("clip");
  clip->set_type(kiln_onnx::AttributeProto::FLOAT);
  clip->set_f(1.0f);
  b.output("y", {3, 1, 1, 1});
  b.output("y_h", {1, 1, 1});
  ImportedModel m = import_onnx(b.save(temp_dir("rnn_reverse")));
  const std::vector<double> x = {0.4, -0.2, 0.9};
  std::vector<float> want_y(3);
  double h = 0.3;
  for (int t = 2; t >= 0; --t) {
    h = std::tanh(std::clamp(2 * x[size_t(t)] + 0.5 * h + 0.1 + 0.2, -1.0, 1.0));
    want_y[size_t(t)] = float(h);
  }
  std::vector<Tensor> out =
      run_model(m, {from_vector<float>({0.4f, -0.2f, 0.9f}, {3, 1, 1})}, Device::cpu());
  ASSERT_EQ(out.size(), 2u);
  expect_near_all(out[0].to_vector<float>(), want_y);
  expect_near_all(out[1].to_vector<float>(), {want_y[0]});  // the reverse pass ends at t = 0
}

TEST(OnnxImport, RecurrentSequenceShorterThanTheInputIsUnsupported) {
  ModelBuilder b(14);
  b.input("x", {3, 2, 1});
  b.init("W", {1, 4, 1}, {1, 1, 1, 1});
  b.init("R", {1, 4, 1}, {1, 1, 1, 1});
  P* lens = b.g->add_initializer();
  lens->set_name("lens");
  lens->set_data_type(P::INT32);
  lens->add_dims(2);
  lens->add_int32_data(3);
  lens->add_int32_data(2);
  auto* n = b.node("LSTM", "lstm", {"x", "W", "R", "", "lens"}, {"y"});
  ModelBuilder::attr_int(n, "hidden_size", 1);
  b.output("y");
  try {
    import_onnx(b.save(temp_dir("lstm_lens")));
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_lens 2 shorter than the sequence (3)"),
              std::string::npos)
        << e.what();
  }
}

TEST(OnnxImport, LegacyBroadcastLinesBUpWithAFromTheAxis) {
  ModelBuilder b(6);  // broadcast=1 with an axis: before opset 7
  b.input("a", {2, 3, 2});
  b.init("b", {3}, {10, 20, 30});
  auto* add = b.node("Add", "add", {"a", "b"}, {"y"});
  ModelBuilder::attr_int(add, "broadcast", 1);
  ModelBuilder::attr_int(add, "axis", 1);
  b.output("y");
  ImportedModel m = import_onnx(b.save(temp_dir("legacy_broadcast")));
  // b[j] is added to a[i][j][k]: a = 0..11 row-major.
  std::vector<float> a(12);
  for (int i = 0; i < 12; ++i) a[size_t(i)] = float(i);
  EXPECT_EQ(run_f32(m, {from_vector<float>(a, {2, 3, 2})}),
            (std::vector<float>{10, 11, 22, 23, 34, 35, 16, 17, 28, 29, 40, 41}));
}

}  // namespace
}  // namespace kiln::onnx
