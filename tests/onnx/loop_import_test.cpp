// ONNX Loop whose iterations are not known at import, and Scan over a symbolic sequence length:
// each runs as one while_loop node, on every device, eagerly and compiled, against the loop
// computed by hand. The bodies read a value from the enclosing graph (captured), the Loop's a
// constant from it too (copied in); Loops and Scans known at import keep unrolling.
#include <gtest/gtest.h>

#include <kiln/kiln.h>

#include "core/onnx/onnx_import.h"
#include "onnx/model_builder.h"
#include "support/devices.h"

namespace kiln::onnx {
namespace {

// Loop(M, cond0, x) whose body is v <- v * w, cond <- sum(v) < limit: w is a graph input the body
// reads from outside, limit an initializer. `trips_input`: M is a graph input, else an initializer.
// `known_x`, `known_w` given: x and w are initializers of those values, so every iteration is known.
std::string loop_model(const std::string& name, bool trips_input, int64_t trips,
                       const std::vector<float>& known_x = {}, const std::vector<float>& known_w = {}) {
  ModelBuilder b;
  if (known_x.empty()) {
    b.input("x", {3});
    b.input("w", {3});
  } else {
    b.init("x", {3}, known_x);
    b.init("w", {3}, known_w);
  }
  if (trips_input) b.io(true, "M", P::INT64, {});
  else b.init_scalar_i64("M", trips);
  b.init("limit", {}, {100});
  P* yes = b.g->add_initializer();
  yes->set_name("cond0");
  yes->set_data_type(P::BOOL);
  yes->add_int32_data(1);
  auto* loop = b.node("Loop", "loop", {"M", "cond0", "x"}, {"y"});
  kiln_onnx::GraphProto* body = ModelBuilder::attr_graph(loop, "body");
  ModelBuilder::declare(body->mutable_input(), "i", P::INT64, {});
  ModelBuilder::declare(body->mutable_input(), "c_in", P::BOOL, {});
  ModelBuilder::declare(body->mutable_input(), "v_in", P::FLOAT, {3});
  ModelBuilder::add_node(body, "Mul", {"v_in", "w"}, "v_out");
  ModelBuilder::attr_int(ModelBuilder::add_node(body, "ReduceSum", {"v_out"}, "s"), "keepdims", 0);
  ModelBuilder::add_node(body, "Less", {"s", "limit"}, "c_out");
  ModelBuilder::declare(body->mutable_output(), "c_out", P::BOOL, {});
  ModelBuilder::declare(body->mutable_output(), "v_out", P::FLOAT, {3});
  b.output("y", {3});
  return b.save(temp_dir(name));
}

// ONNX's semantics, by hand: while i < M and cond, (cond, v) = body(v), i += 1.
std::vector<float> by_hand(std::vector<float> v, const std::vector<float>& w, int64_t trips) {
  bool cond = true;
  for (int64_t i = 0; i < trips && cond; ++i) {
    float s = 0;
    for (size_t k = 0; k < v.size(); ++k) s += (v[k] *= w[k]);
    cond = s < 100;
  }
  return v;
}

std::vector<Device> devices() { return testing::computing_devices(); }

bool has_while_loop(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->kind == OpKind::WhileLoop) return true;
  return false;
}

TEST(OnnxLoop, AConditionComputedFromTensorValuesRunsAsOneWhileLoop) {
  const ImportedModel m = import_onnx(loop_model("loop_cond", false, 1000));
  EXPECT_TRUE(has_while_loop(m.graph));
  const std::vector<float> w = {2, 1, 1.5f};
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    EagerModel eager(m, device);
    for (const std::vector<float>& x : {std::vector<float>{1, 2, 3}, std::vector<float>{200, 0, 0},
                                        std::vector<float>{0.25f, 0.5f, 0.125f}}) {
      const std::vector<Tensor> in = {from_vector(x, {3}, device), from_vector(w, {3}, device)};
      const std::vector<float> want = by_hand(x, w, 1000);
      EXPECT_EQ(compiled.run(in).at(0).to_vector<float>(), want) << device.name();
      EXPECT_EQ(eager.run(in).at(0).to_vector<float>(), want) << device.name();
    }
  }
}

TEST(OnnxLoop, ATripCountGivenAtRunTimeBoundsTheLoop) {
  const ImportedModel m = import_onnx(loop_model("loop_trips", true, 0));
  EXPECT_TRUE(has_while_loop(m.graph));
  const std::vector<float> x = {0.5f, 0.25f, 1}, w = {2, 2, 2};
  for (const Device& device : devices()) {
    CompiledModel compiled(m, device);
    for (int64_t trips : {0, 1, 3, 50}) {
      const std::vector<Tensor> in = {from_vector(x, {3}, device), from_vector(w, {3}, device),
                                      from_vector<int64_t>({trips}, {}, device)};
      EXPECT_EQ(compiled.run(in).at(0).to_vector<float>(), by_hand(x, w, trips)) << device.name() << " M=" << trips;
    }
  }
}

// A Loop whose every iteration is known at import (x and w are constants) is still unrolled: no
// while_loop is left, and the result is a constant.
TEST(OnnxLoop, AConditionKnownAtImportStillUnrolls) {
  const ImportedModel m = import_onnx(loop_model("loop_known", false, 1000, {1, 2, 3}, {2, 2, 2}));
  EXPECT_FALSE(has_while_loop(m.graph));
  EXPECT_EQ(run_model(m, {}, Device::cpu()).at(0).to_vector<float>(), by_hand({1, 2, 3}, {2, 2, 2}, 1000));
}

// Scan(s0, xs) over xs [seq, 2] (seq symbolic unless `length` is given), whose body is
// s <- s + x * w, scan outputs (s, x * w): w is a graph input the body reads from outside.
// `reverse_in`: xs is read from its end; `reverse_out`: the first scan output is stacked from its end.
// `input_directions`: the scan_input_directions attribute, when not the one reverse_in gives.
std::string scan_model(const std::string& name, bool reverse_in, bool reverse_out, int64_t length = 0,
                       const std::vector<int64_t>& input_directions = {}) {
  ModelBuilder b(16);
  b.input("s0", {2});
  b.input("xs", {length, 2}, {length ? "" : "seq", ""});
  b.input("w", {2});
  auto* scan = b.node("Scan", "scan", {"s0", "xs"}, {"s", "ys", "products"});
  ModelBuilder::attr_int(scan, "num_scan_inputs", 1);
  ModelBuilder::attr_ints(scan, "scan_input_directions",
                          input_directions.empty() ? std::vector<int64_t>{reverse_in ? 1 : 0} : input_directions);
  ModelBuilder::attr_ints(scan, "scan_output_directions", {reverse_out ? 1 : 0, 0});
  kiln_onnx::GraphProto* body = ModelBuilder::attr_graph(scan, "body");
  ModelBuilder::declare(body->mutable_input(), "s_in", P::FLOAT, {2});
  ModelBuilder::declare(body->mutable_input(), "x", P::FLOAT, {2});
  ModelBuilder::add_node(body, "Mul", {"x", "w"}, "xw");
  ModelBuilder::add_node(body, "Add", {"s_in", "xw"}, "s_out");
  ModelBuilder::add_node(body, "Identity", {"s_out"}, "y");
  for (const char* out : {"s_out", "y", "xw"}) ModelBuilder::declare(body->mutable_output(), out, P::FLOAT, {2});
  b.output("s", {2});
  b.output("ys");
  b.output("products");
  return b.save(temp_dir(name));
}

// ONNX's Scan by hand: the final state, then the scan outputs [seq, 2] each.
std::vector<std::vector<float>> scan_by_hand(std::vector<float> s, const std::vector<float>& xs,
                                             const std::vector<float>& w, bool reverse_in, bool reverse_out) {
  const size_t seq = xs.size() / 2;
  std::vector<float> ys(xs.size()), products(xs.size());
  for (size_t t = 0; t < seq; ++t) {
    const size_t in = reverse_in ? seq - 1 - t : t, out = reverse_out ? seq - 1 - t : t;
    for (size_t k = 0; k < 2; ++k) {
      const float xw = xs[2 * in + k] * w[k];
      s[k] += xw;
      ys[2 * out + k] = s[k];
      products[2 * t + k] = xw;
    }
  }
  return {s, ys, products};
}

TEST(OnnxScan, ASymbolicLengthRunsAsOneWhileLoopForEveryLength) {
  const std::vector<float> s0 = {1, -1}, w = {0.5f, 2};
  for (const auto& [reverse_in, reverse_out] : {std::pair{false, false}, {true, false}, {false, true}}) {
    const std::string label =
        std::string(reverse_in ? "reverse in" : "forward in") + (reverse_out ? ", reverse out" : "");
    const ImportedModel m = import_onnx(scan_model("scan_symbolic", reverse_in, reverse_out));
    EXPECT_TRUE(has_while_loop(m.graph)) << label;
    for (const Device& device : devices()) {
      CompiledModel compiled(m, device);
      EagerModel eager(m, device);
      for (int64_t seq : {1, 4, 9}) {
        std::vector<float> xs;
        for (int64_t i = 0; i < 2 * seq; ++i) xs.push_back(0.25f * float(i) - 1);
        const std::vector<Tensor> in = {from_vector(s0, {2}, device), from_vector(xs, {seq, 2}, device),
                                        from_vector(w, {2}, device)};
        const std::vector<std::vector<float>> want = scan_by_hand(s0, xs, w, reverse_in, reverse_out);
        for (const auto& [how, outs] : {std::pair{"compiled", compiled.run(in)}, {"eager", eager.run(in)}}) {
          ASSERT_EQ(outs.size(), 3u);
          EXPECT_EQ(outs[1].sizes(), (std::vector<int64_t>{seq, 2})) << label;
          for (size_t k = 0; k < 3; ++k)
            EXPECT_EQ(outs[k].to_vector<float>(), want[k]) << device.name() << " " << how << ", " << label
                                                           << ", seq " << seq << ", output " << k;
        }
      }
    }
  }
}

TEST(OnnxScan, AStaticLengthStillUnrolls) {
  const ImportedModel m = import_onnx(scan_model("scan_static", true, true, 3));
  EXPECT_FALSE(has_while_loop(m.graph));
  const std::vector<float> s0 = {1, 2}, xs = {1, 2, 3, 4, 5, 6}, w = {1, -1};
  const std::vector<Tensor> in = {from_vector(s0, {2}), from_vector(xs, {3, 2}), from_vector(w, {2})};
  const std::vector<Tensor> outs = run_model(m, in, Device::cpu());
  const std::vector<std::vector<float>> want = scan_by_hand(s0, xs, w, true, true);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(outs.at(k).to_vector<float>(), want[k]) << "output " << k;
}

// One direction per scan input: a list of another length is refused by name, looped or unrolled.
TEST(OnnxScan, ScanInputDirectionsOfTheWrongLengthAreRefused) {
  for (int64_t length : {0, 3}) {
    try {
      import_onnx(scan_model("scan_bad_directions", false, false, length, {0, 1}));
      FAIL() << "imported, length " << length;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("scan_input_directions need one entry per scan input (1), have 1 and 2"), std::string::npos)
          << msg;
      EXPECT_NE(msg.find("Scan"), std::string::npos) << msg;  // the node
    }
  }
}

}  // namespace
}  // namespace kiln::onnx
