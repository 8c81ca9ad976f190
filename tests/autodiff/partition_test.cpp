// partition_for_backward: what a compiled differentiable call's forward returns for its backward,
// a min cut over bytes. Cheap ops (pointwise maps, views) may be recomputed inside the backward;
// matmuls, norms and reductions it reads are saved; a memory budget saves more to recompute less.
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

// The backward reads the sum (sin's gradient) and sin's result (the last weight's). Saving the
// two matmul results the sum is made of would keep twice the bytes: the cut saves the sum itself
// and recomputes sin from it.
const char* kSumOfMatmuls = R"(graph @g(%0: f32[4,8] "x", %1: f32[8,16] "w1", %2: f32[8,16] "w2", %3: f32[16,2] "w3") {
  %4: f32[4,16] = matmul(%0, %1)
  %5: f32[4,16] = matmul(%0, %2)
  %6: f32[4,16] = add(%4, %5)
  %7: f32[4,16] = sin(%6)
  %8: f32[4,2] = matmul(%7, %3)
  return %8
})";

TEST(Partition, TheMinCutSavesAPointwiseResultWhenItIsSmallerThanItsOperands) {
  Graph g = parse_graph(kSumOfMatmuls);
  const Partition p = partition_for_backward(g, {false, true, true, true});
  EXPECT_EQ(print_partition(p),
            "save %6 add f32[4,16] (256 bytes)\n"
            "recompute %7 sin\n"
            "saved 256 bytes (min cut 256, all read 512)\n");
}

// A budget between the min cut and saving all that the backward reads: 1 saves sin's result too
// and recomputes nothing; 0.5 allows 384 bytes, too few for the 256 more.
TEST(Partition, AMemoryBudgetSavesMoreToRecomputeLess) {
  Graph g = parse_graph(kSumOfMatmuls);
  const Partition all = partition_for_backward(g, {false, true, true, true}, {.memory_budget = 1});
  EXPECT_EQ(all.saved_bytes, 512);
  EXPECT_TRUE(all.recomputed.empty());
  ASSERT_EQ(all.saved.size(), 2u);
  EXPECT_EQ(all.saved[1]->producer->kind, OpKind::Sin);
  const Partition half = partition_for_backward(g, {false, true, true, true}, {.memory_budget = 0.5});
  EXPECT_EQ(half.saved_bytes, 256);
  EXPECT_EQ(half.recomputed.size(), 1u);
}

}  // namespace
}  // namespace kiln
