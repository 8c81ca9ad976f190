// values_to_save: what a compiled differentiable call's forward returns for its backward. Cheap
// ops (pointwise maps, views) are recomputed inside the backward; the rest it reads is saved.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/autodiff/partition.h"
#include "core/ir/op.h"
#include "core/ir/text.h"

namespace kiln {
namespace {

// The ops whose results are saved, in graph order.
std::vector<std::string> saved_ops(const std::string& text, const std::vector<bool>& wrt) {
  Graph g = parse_graph(text);
  std::vector<std::string> ops;
  for (const Value* v : values_to_save(g, wrt)) ops.push_back(std::string(op_name(v->producer->kind)));
  return ops;
}

// linear -> gelu -> linear: gelu's gradient and the second weight's read the first linear's
// result and gelu's; gelu is recomputed from the saved linear result.
const char* kMlp = R"(graph @mlp(%0: f32[4,8] "x", %1: f32[16,8] "w1", %2: f32[16] "b1", %3: f32[2,16] "w2") {
  %4: f32[4,16] = linear(%0, %1, %2)
  %5: f32[4,16] = gelu(%4)
  %6: f32[4,2] = linear(%5, %3)
  return %6
})";

TEST(Partition, PointwiseResultsAreRecomputedFromTheMatmulsTheyFollow) {
  EXPECT_EQ(saved_ops(kMlp, {false, true, true, true}), (std::vector<std::string>{"linear"}));
}

// Differentiating only the last weight needs gelu's result alone, recomputed from the linear.
TEST(Partition, OnlyWhatTheRequestedGradientsReadIsSaved) {
  EXPECT_EQ(saved_ops(kMlp, {false, false, false, true}), (std::vector<std::string>{"linear"}));
  EXPECT_TRUE(saved_ops(kMlp, {false, false, false, false}).empty());
}

// A norm's result is saved for the matmul after it; the norm's own gradient reads its input, and
// tanh's reads its result, the function's output, so nothing behind that is recomputed.
TEST(Partition, ANormsResultIsSavedAndItsInputIsAGraphInput) {
  const char* text = R"(graph @block(%0: f32[2,4,8] "x", %1: f32[8] "g", %2: f32[8,8] "w") {
  %3: f32[2,4,8] = layer_norm(%0, %1) {axis=-1}
  %4: f32[2,4,8] = matmul(%3, %2)
  %5: f32[2,4,8] = tanh(%4)
  return %5
})";
  EXPECT_EQ(saved_ops(text, {true, true, true}), (std::vector<std::string>{"layer_norm"}));
}

}  // namespace
}  // namespace kiln
