// Shape arithmetic on symbolic dims at import: models written here with dim_params, whose Shape
// subgraphs must fold to SymInt expressions (checked in the imported graph's text), run at several
// sizes from one import, on every device, against values derived by hand.
#include <gtest/gtest.h>

#include <cmath>

#include <kiln/kiln.h>

#include "core/ir/text.h"
#include "core/onnx/onnx_import.h"
#include "onnx/model_builder.h"
#include "support/devices.h"

namespace kiln::onnx {
namespace {

std::vector<Device> devices() { return testing::computing_devices(); }

std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) - 3.5f;
  return v;
}

// y = reshape(x, [batch*seq, 8]) with the target computed as exporters write it:
// Shape -> Gather -> Mul -> Unsqueeze -> Concat.
TEST(SymbolicShapes, ShapeArithmeticFoldsIntoOneReshapeThatServesEverySize) {
  ModelBuilder b;
  b.input("x", {0, 0, 8}, {"batch", "seq"});
  b.init_i64("i0", {0});
  b.init_i64("i1", {1});
  b.init_i64("eight", {8});
  b.node("Shape", "shape", {"x"}, {"s"});
  b.node("Gather", "b", {"s", "i0"}, {"bd"});
  b.node("Gather", "t", {"s", "i1"}, {"td"});
  b.node("Mul", "bt", {"bd", "td"}, {"rows"});
  ModelBuilder::attr_int(b.node("Concat", "cat", {"rows", "eight"}, {"target"}), "axis", 0);
  b.node("Reshape", "flat", {"x", "target"}, {"y"});
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_reshape")));
  EXPECT_EQ(m.outputs[0].type.str(), "f32[batch*seq,8]");
  ASSERT_EQ(m.graph.num_nodes(), 1u) << print_graph(m.graph);  // the shape math left no node
  EXPECT_NE(print_graph(m.graph).find("reshape(%0) {shape=[batch*seq,8]}"), std::string::npos)
      << print_graph(m.graph);
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    for (auto [batch, seq] : {std::pair<int64_t, int64_t>{1, 3}, {4, 5}}) {
      const std::vector<float> x = iota(batch * seq * 8);
      const Tensor y = compiled.run({from_vector(x, {batch, seq, 8}, device)}).at(0);
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{batch * seq, 8})) << device.name();
      EXPECT_EQ(y.to_vector<float>(), x) << device.name();
    }
  }
}

// y = x * float(n) where n = Shape(x)[0]: the shape value is read as data, so the sym_ints node
// stays in the graph and computes n at each run, eagerly and compiled.
TEST(SymbolicShapes, AShapeValueUsedAsDataIsComputedAtEachRun) {
  ModelBuilder b;
  b.input("x", {0}, {"n"});
  b.node("Shape", "shape", {"x"}, {"s"});
  ModelBuilder::attr_int(b.node("Cast", "to_float", {"s"}, {"nf"}), "to", P::FLOAT);
  b.node("Mul", "scale", {"x", "nf"}, {"y"});
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_data")));
  EXPECT_NE(print_graph(m.graph).find("sym_ints() {dtype=i64, scalar=false, values=[n]}"),
            std::string::npos)
      << print_graph(m.graph);
  for (const Device& device : devices()) {
    EagerModel eager(m, device);
    CompiledModel compiled(m, device);
    for (int64_t n : {3, 7}) {
      const std::vector<float> x = iota(n);
      std::vector<float> want;
      for (float v : x) want.push_back(v * float(n));
      const Tensor in = from_vector(x, {n}, device);
      EXPECT_EQ(eager.run({in}).at(0).to_vector<float>(), want) << device.name() << " eager, n=" << n;
      EXPECT_EQ(compiled.run({in}).at(0).to_vector<float>(), want) << device.name() << " compiled, n=" << n;
    }
  }
}

// ConstantOfShape of [batch, 3] (zeros to add to x) becomes a runtime expand of the scalar.
TEST(SymbolicShapes, ConstantOfShapeWithASymbolicSizeBroadcastsAtRunTime) {
  ModelBuilder b;
  b.input("x", {0, 3}, {"batch"});
  b.init_i64("i0", {0});
  b.init_i64("three", {3});
  b.node("Shape", "shape", {"x"}, {"s"});
  b.node("Gather", "b", {"s", "i0"}, {"bd"});
  ModelBuilder::attr_int(b.node("Concat", "cat", {"bd", "three"}, {"dims"}), "axis", 0);
  b.node("ConstantOfShape", "zeros", {"dims"}, {"z"});
  b.node("Add", "add", {"x", "z"}, {"y"});
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_const_of_shape")));
  EXPECT_NE(print_graph(m.graph).find("expand(%"), std::string::npos) << print_graph(m.graph);
  for (int64_t batch : {2, 5}) {
    const std::vector<float> x = iota(batch * 3);
    EXPECT_EQ(run_model(m, {from_vector(x, {batch, 3})}, Device::cpu()).at(0).to_vector<float>(), x);
  }
}

// x[:, :n] of a 6-column table, n = Shape(x)[1]: the import decides n <= 6 (guards), and a run
// with n > 6 is refused, naming the decision, the Slice node and the size.
TEST(SymbolicShapes, ASliceBySymbolicLengthKeepsItsGuardsAndARunBreakingThemIsRefused) {
  ModelBuilder b;
  b.input("x", {2, 0}, {"", "n"});
  b.init("table", {2, 6}, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  b.init_i64("zero", {0});
  b.init_i64("one", {1});
  b.node("Shape", "shape", {"x"}, {"s"});
  b.node("Gather", "len", {"s", "one"}, {"n1"});  // [n]
  b.node("Slice", "cut", {"table", "zero", "n1", "one"}, {"part"});
  b.node("Add", "add", {"x", "part"}, {"y"});
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_slice")));
  EXPECT_EQ(m.outputs[0].type.str(), "f32[2,n]");
  EXPECT_FALSE(m.guards.empty());
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    const Tensor y = compiled.run({zeros({2, 4}, device)}).at(0);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13})) << device.name();
    try {
      compiled.run({zeros({2, 9}, device)});
      FAIL() << device.name() << ": n=9 ran past the 6-column table";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("n=9"), std::string::npos) << msg;
      EXPECT_NE(msg.find("n > 6 was false"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cut (Slice)"), std::string::npos) << msg;
    }
  }
}

// Position ids as transformers export them: Range(0, seq, 1) with seq = Shape(x)[1], a scalar.
TEST(SymbolicShapes, RangeToASymbolicLimitCountsAtEachRun) {
  ModelBuilder b;
  b.input("x", {2, 0}, {"", "seq"});
  b.init_i64("one", {1});
  b.node("Shape", "shape", {"x"}, {"s"});
  b.node("Gather", "len", {"s", "one"}, {"n1"});
  b.init_i64("scalar", {});
  b.node("Reshape", "to_scalar", {"n1", "scalar"}, {"n"});
  b.init_scalar_i64("start", 0);
  b.init_scalar_i64("delta", 1);
  b.node("Range", "positions", {"start", "n", "delta"}, {"ids"});
  ModelBuilder::attr_int(b.node("Cast", "to_float", {"ids"}, {"idf"}), "to", P::FLOAT);
  b.node("Add", "add", {"x", "idf"}, {"y"});
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_range")));
  EXPECT_NE(print_graph(m.graph).find("arange() {count=[max(0,seq)], dtype=i64, start=0.0, step=1.0}"),
            std::string::npos)
      << print_graph(m.graph);
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    for (int64_t seq : {3, 6}) {
      std::vector<float> want;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t i = 0; i < seq; ++i) want.push_back(float(i));
      EXPECT_EQ(compiled.run({zeros({2, seq}, device)}).at(0).to_vector<float>(), want)
          << device.name() << ", seq=" << seq;
    }
  }
}

// The last position of a sequence, x[:, -1, :]: a negative index along a symbolic dim counts from
// the run's end.
TEST(SymbolicShapes, ANegativeIndexAlongASymbolicDimCountsFromTheEnd) {
  ModelBuilder b;
  b.input("x", {2, 0, 3}, {"", "seq"});
  b.init_scalar_i64("last", -1);
  ModelBuilder::attr_int(b.node("Gather", "pick", {"x", "last"}, {"y"}), "axis", 1);
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_gather_last")));
  EXPECT_EQ(m.outputs[0].type.str(), "f32[2,3]");
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    for (int64_t seq : {2, 5}) {
      const std::vector<float> x = iota(2 * seq * 3);
      std::vector<float> want;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 3; ++c) want.push_back(x[size_t((r * seq + seq - 1) * 3 + c)]);
      EXPECT_EQ(compiled.run({from_vector(x, {2, seq, 3}, device)}).at(0).to_vector<float>(), want)
          << device.name() << ", seq=" << seq;
    }
  }
}

// A causal mask as exporters write torch.triu: Trilu over [seq, seq] with k = 1.
TEST(SymbolicShapes, TriluOverSymbolicDimsMasksAtEachSize) {
  ModelBuilder b;
  b.input("x", {0, 0}, {"seq", "seq"});
  b.init_scalar_i64("k", 1);
  b.node("Trilu", "upper", {"x", "k"}, {"y"});
  b.output("y");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_trilu")));
  for (const Device& device : devices()) {
    EagerModel eager(m, device);
    CompiledModel compiled(m, device);
    for (int64_t seq : {3, 4}) {
      std::vector<float> ones(size_t(seq * seq), 1.0f), want;
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t j = 0; j < seq; ++j) want.push_back(j - i >= 1 ? 1.0f : 0.0f);
      const Tensor x = from_vector(ones, {seq, seq}, device);
      EXPECT_EQ(eager.run({x}).at(0).to_vector<float>(), want) << device.name() << " eager, seq=" << seq;
      EXPECT_EQ(compiled.run({x}).at(0).to_vector<float>(), want) << device.name() << ", seq=" << seq;
    }
  }
}

// An RNN without initial states starts from zeros of the run's batch: h_t = tanh(2 x_t + 0.5 h_{t-1}),
// each batch row on its own.
TEST(SymbolicShapes, ARecurrentOpWithoutInitialStatesTakesTheRunsBatch) {
  ModelBuilder b(14);
  b.input("x", {2, 0, 1}, {"", "batch"});
  b.init("W", {1, 1, 1}, {2});
  b.init("R", {1, 1, 1}, {0.5f});
  ModelBuilder::attr_int(b.node("RNN", "rnn", {"x", "W", "R"}, {"y", "y_h"}), "hidden_size", 1);
  b.output("y");
  b.output("y_h");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_rnn")));
  for (int64_t batch : {1, 3}) {
    std::vector<float> x, want_h;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t r = 0; r < batch; ++r) x.push_back(0.3f * float(r + 1) - 0.2f * float(t));
    for (int64_t r = 0; r < batch; ++r) {
      double h = 0;
      for (int64_t t = 0; t < 2; ++t) h = std::tanh(2 * double(x[size_t(t * batch + r)]) + 0.5 * h);
      want_h.push_back(float(h));
    }
    const std::vector<float> got = run_model(m, {from_vector(x, {2, batch, 1})}, Device::cpu()).at(1).to_vector<float>();
    ASSERT_EQ(got.size(), want_h.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want_h[i], 1e-6) << "batch " << batch;
  }
}

// A row repeated once per batch row (Tile by [batch, 1] from Shape), and an equal Split of a
// symbolic dim into two halves.
TEST(SymbolicShapes, TileBySymbolicRepeatsAndAnEqualSplitOfASymbolicDim) {
  ModelBuilder b;
  b.input("x", {0, 3}, {"batch"});
  b.init("row", {1, 3}, {1, 2, 3});
  b.init_i64("i0", {0});
  b.init_i64("one", {1});
  b.node("Shape", "shape", {"x"}, {"s"});
  b.node("Gather", "b", {"s", "i0"}, {"bd"});
  ModelBuilder::attr_int(b.node("Concat", "cat", {"bd", "one"}, {"reps"}), "axis", 0);
  b.node("Tile", "tile", {"row", "reps"}, {"rows"});
  b.node("Add", "add", {"x", "rows"}, {"y"});
  ModelBuilder::attr_int(b.node("Split", "halves", {"y"}, {"top", "bottom"}), "axis", 0);
  b.output("top");
  b.output("bottom");
  // The hint decides the split's shape decisions: at the default 1 the halves would be empty.
  ImportOptions options;
  options.input_shapes["x"] = {4, 3};
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_tile_split")), options);
  EXPECT_EQ(m.outputs[0].type.str(), "f32[batch//2,3]");
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    for (int64_t batch : {2, 4}) {
      const std::vector<Tensor> out = compiled.run({zeros({batch, 3}, device)});
      std::vector<float> half;
      for (int64_t r = 0; r < batch / 2; ++r) half.insert(half.end(), {1, 2, 3});
      EXPECT_EQ(out.at(0).to_vector<float>(), half) << device.name() << ", batch=" << batch;
      EXPECT_EQ(out.at(1).to_vector<float>(), half) << device.name() << ", batch=" << batch;
    }
  }
}

// Position ids from an attention mask, as transformers compute them: CumSum along a symbolic
// sequence, forward and reverse exclusive.
TEST(SymbolicShapes, CumSumAlongASymbolicDim) {
  ModelBuilder b;
  b.input("x", {2, 0}, {"", "seq"});
  b.init_scalar_i64("axis", 1);
  b.node("CumSum", "forward", {"x", "axis"}, {"y"});
  auto* rev = b.node("CumSum", "backward", {"x", "axis"}, {"z"});
  ModelBuilder::attr_int(rev, "reverse", 1);
  ModelBuilder::attr_int(rev, "exclusive", 1);
  b.output("y");
  b.output("z");
  const ImportedModel m = import_onnx(b.save(temp_dir("sym_cumsum")));
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    for (int64_t seq : {3, 5}) {
      const std::vector<float> x = iota(2 * seq);
      std::vector<float> y, z;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t i = 0; i < seq; ++i) {
          float before = 0, after = 0;
          for (int64_t j = 0; j <= i; ++j) before += x[size_t(r * seq + j)];
          for (int64_t j = i + 1; j < seq; ++j) after += x[size_t(r * seq + j)];
          y.push_back(before);
          z.push_back(after);
        }
      const std::vector<Tensor> out = compiled.run({from_vector(x, {2, seq}, device)});
      EXPECT_EQ(out.at(0).to_vector<float>(), y) << device.name() << ", seq=" << seq;
      EXPECT_EQ(out.at(1).to_vector<float>(), z) << device.name() << ", seq=" << seq;
    }
  }
}

// A Reshape target read from tensor contents cannot be known at import: the error says so and
// names the node that computes it.
TEST(SymbolicShapes, AShapeComputedFromTensorValuesIsRefusedNamingItsNode) {
  ModelBuilder b;
  b.input("x", {6});
  b.input("dims", {2});
  ModelBuilder::attr_int(b.node("Cast", "dims_to_int", {"dims"}, {"target"}), "to", P::INT64);
  b.node("Reshape", "rs", {"x", "target"}, {"y"});
  b.output("y");
  try {
    import_onnx(b.save(temp_dir("sym_data_dependent")));
    FAIL() << "a data-dependent reshape imported";
  } catch (const UnsupportedError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Reshape ('rs')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("data-dependent"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dims_to_int (Cast)"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln::onnx
