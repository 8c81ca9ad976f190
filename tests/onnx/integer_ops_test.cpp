// ONNX's narrow and unsigned integer types and the ops built on them (QuantizeLinear, BitShift),
// against values derived by hand, on every device that computes, eager and compiled.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "core/frontend/factories.h"
#include "core/onnx/onnx_import.h"
#include "onnx/model_builder.h"

namespace kiln::onnx {
namespace {

// cpu and every other device that computes (lavapipe here), each eager and compiled.
template <class T>
void expect_everywhere(const ImportedModel& m, const std::vector<Tensor>& inputs, const std::vector<T>& want) {
  for (const DeviceEntry& e : available_devices()) {
    if (e.kind == BackendKind::Null) continue;
    const Device device(e.kind, e.index);
    std::vector<Tensor> on_device;
    for (const Tensor& x : inputs) on_device.push_back(x.to(device));
    EXPECT_EQ(EagerModel(m, device).run(on_device).at(0).to_vector<T>(), want) << device.description() << " eager";
    EXPECT_EQ(CompiledModel(m, device).run(on_device).at(0).to_vector<T>(), want)
        << device.description() << " compiled";
  }
}

TEST(OnnxIntegers, QuantizeLinearToInt8PerAxisRoundsHalfToEvenAndSaturates) {
  ModelBuilder b(13);
  b.input("x", {2, 3});
  b.init("scale", {2}, {0.5f, 2.0f});
  P* zp = b.g->add_initializer();
  zp->set_name("zp");
  zp->set_data_type(P::INT8);
  zp->add_dims(2);
  zp->add_int32_data(-1);
  zp->add_int32_data(3);
  auto* q = b.node("QuantizeLinear", "q", {"x", "scale", "zp"}, {"y"});
  ModelBuilder::attr_int(q, "axis", 0);
  b.io(false, "y", P::INT8, {2, 3});
  const ImportedModel m = import_onnx(b.save(temp_dir("quantize_int8")));
  // Row 0 (scale 0.5, zero point -1): 1.25/0.5 = 2.5 -> 2 (half to even) - 1 = 1; 100/0.5 - 1
  // saturates to 127; -0.75/0.5 = -1.5 -> -2 - 1 = -3. Row 1 (scale 2, zero point 3): 5/2 = 2.5 ->
  // 2 + 3 = 5; -1000/2 + 3 saturates to -128; 3/2 = 1.5 -> 2 + 3 = 5.
  expect_everywhere<int8_t>(m, {from_vector<float>({1.25f, 100, -0.75f, 5, -1000, 3}, {2, 3})},
                            {1, 127, -3, 5, -128, 5});
}

TEST(OnnxIntegers, BitShiftWrapsToTheWidthAndShiftsByTheWidthOrMoreGiveZero) {
  for (const char* direction : {"LEFT", "RIGHT"}) {
    ModelBuilder b(11);
    b.io(true, "x", P::UINT8, {4});
    b.io(true, "s", P::UINT8, {4});
    auto* n = b.node("BitShift", "shift", {"x", "s"}, {"y"});
    ModelBuilder::attr_string(n, "direction", direction);
    b.io(false, "y", P::UINT8, {4});
    const ImportedModel m = import_onnx(b.save(temp_dir(std::string("bitshift_") + direction)));
    const std::vector<Tensor> in = {from_vector<uint8_t>({200, 3, 255, 16}),
                                    from_vector<uint8_t>({1, 2, 8, 4})};
    // 200 << 1 = 400 wraps to 144; 3 << 2 = 12; a shift by 8 gives 0; 16 << 4 = 256 wraps to 0.
    if (std::string(direction) == "LEFT") expect_everywhere<uint8_t>(m, in, {144, 12, 0, 0});
    else expect_everywhere<uint8_t>(m, in, {100, 0, 0, 1});
  }
}

TEST(OnnxIntegers, Int16ChainsWrapAfterEveryOpAsTheReferenceStoresThem) {
  // (x * x) + x - 1 in int16: a fused kernel computes in 32 bits and must wrap each product.
  ModelBuilder b(13);
  b.io(true, "x", P::INT16, {3});
  P* one = b.g->add_initializer();
  one->set_name("one");
  one->set_data_type(P::INT16);
  one->add_int32_data(1);
  b.node("Mul", "square", {"x", "x"}, {"sq"});
  b.node("Add", "plus", {"sq", "x"}, {"s"});
  b.node("Sub", "minus", {"s", "one"}, {"y"});
  b.io(false, "y", P::INT16, {3});
  const ImportedModel m = import_onnx(b.save(temp_dir("int16_chain")));
  // 300 * 300 = 90000 wraps to 90000 - 65536 = 24464; + 300 - 1 = 24763. 200: 40000 wraps to
  // -25536; + 200 - 1 = -25337. -7: 49 - 7 - 1 = 41.
  expect_everywhere<int16_t>(m, {from_vector<int16_t>({300, 200, -7})}, {24763, -25337, 41});
}

TEST(OnnxIntegers, Uint64KeepsValuesPastTheSignedRange) {
  ModelBuilder b(13);
  b.io(true, "a", P::UINT64, {2});
  b.io(true, "b", P::UINT64, {2});
  b.node("Max", "max", {"a", "b"}, {"m"});
  b.node("Add", "add", {"m", "b"}, {"y"});
  b.io(false, "y", P::UINT64, {2});
  const ImportedModel m = import_onnx(b.save(temp_dir("uint64")));
  const uint64_t big = (uint64_t(1) << 63) + 5;  // negative as an int64
  expect_everywhere<uint64_t>(m, {from_vector<uint64_t>({big, 1}), from_vector<uint64_t>({2, 7})},
                              {big + 2, 14});
}

}  // namespace
}  // namespace kiln::onnx
