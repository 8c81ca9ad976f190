// ONNX Loop whose iterations are not known at import: it runs as one while_loop node, on every
// device, eagerly and compiled, against the loop computed by hand. The body reads a value from the
// enclosing graph (captured) and a constant from it (copied in); Loops still unrolled at import
// keep doing so.
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
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(kiln_onnx::AttributeProto::GRAPH);
  kiln_onnx::GraphProto* body = a->mutable_g();
  body->set_name("body");
  auto declare = [](google::protobuf::RepeatedPtrField<kiln_onnx::ValueInfoProto>* list, const std::string& n,
                    int type, std::vector<int64_t> dims) {
    auto* vi = list->Add();
    vi->set_name(n);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  };
  declare(body->mutable_input(), "i", P::INT64, {});
  declare(body->mutable_input(), "c_in", P::BOOL, {});
  declare(body->mutable_input(), "v_in", P::FLOAT, {3});
  auto add = [&](const std::string& op, const std::vector<std::string>& in, const std::string& out) {
    auto* n = body->add_node();
    n->set_op_type(op);
    n->set_name("body_" + out);
    for (const auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  };
  add("Mul", {"v_in", "w"}, "v_out");
  ModelBuilder::attr_int(add("ReduceSum", {"v_out"}, "s"), "keepdims", 0);
  add("Less", {"s", "limit"}, "c_out");
  declare(body->mutable_output(), "c_out", P::BOOL, {});
  declare(body->mutable_output(), "v_out", P::FLOAT, {3});
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

}  // namespace
}  // namespace kiln::onnx
