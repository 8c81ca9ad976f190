// Winograd F(2x2, 3x3) (core/passes/winograd.cpp, core/ir/ops/winograd.cpp): convs rewritten by
// the pass give the direct conv's values on every device, against the reference interpreter's
// direct conv (im2col + GEMM) as the oracle; the shape rules refuse what they cannot transform.
// Each op's lowering against its reference kernel: tests/kernel/op_cases.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/kiln.h"
#include "core/passes/pass.h"
#include "core/passes/passes.h"
#include "core/runtime/compile_graph.h"
#include "support/rewrite_checks.h"

namespace kiln {
namespace {

using testing::count_ops;
using testing::parse_checked;

// Each case: a conv as ResNet's layers have it (padding 1, a bias, a relu after), one without
// padding over odd sizes (the last tile row and column cropped), one with asymmetric padding and
// batch 2, and a conv whose input is a value computed in the graph.
const char* kConvs = R"(graph @convs(%0: f32[1,8,9,9] "x", %1: f32[4,8,3,3] "w", %2: f32[4] "b",
                                     %3: f32[2,4,7,6] "x2", %4: f32[6,4,3,3] "w2") {
  %5: f32[1,4,9,9] = conv(%0, %1, %2) {channels_last=false, dilation=[1,1], groups=1, padding=[1,1,1,1], stride=[1,1]}
  %6: f32[1,4,9,9] = relu(%5)
  %7: f32[1,6,7,7] = conv(%6, %4) {channels_last=false, dilation=[1,1], groups=1, padding=[0,0,0,0], stride=[1,1]}
  %8: f32[2,6,7,6] = conv(%3, %4) {channels_last=false, dilation=[1,1], groups=1, padding=[2,0,0,2], stride=[1,1]}
  return %6, %7, %8
})";

TEST(Winograd, RewrittenConvsMatchTheDirectConvOnEveryDevice) {
  const Graph original = parse_checked(kConvs);
  Graph rewritten = original.clone();
  run_pipeline(rewritten, {winograd_pass([](const Node&) { return true; })}, {});
  ASSERT_EQ(count_ops(rewritten, OpKind::Conv), 0);
  ASSERT_EQ(count_ops(rewritten, OpKind::WinogradOutput), 3);

  const std::vector<Tensor> inputs = {randn({1, 8, 9, 9}, Device::ref(), 1), randn({4, 8, 3, 3}, Device::ref(), 2),
                                      randn({4}, Device::ref(), 3), randn({2, 4, 7, 6}, Device::ref(), 4),
                                      randn({6, 4, 3, 3}, Device::ref(), 5)};
  // Sums of 72 products of N(0, 1) values (and of 36 over relus): Winograd's transforms add and
  // subtract a tile's values before multiplying, a few f32 roundings of values that size.
  testing::expect_rewrite_matches_on_every_device(original, rewritten, inputs, 2e-4);
}

TEST(Winograd, ShapeRulesRefuseWhatTheTransformsDoNotCover) {
  try {
    (void)parse_checked(R"(graph @bad(%0: f32[4,4,5,5]) {
  %1: f32[16,4,4] = winograd_weights(%0)
  return %1
})");
    FAIL() << "a 5x5 weight was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("winograd_weights"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3, 3]"), std::string::npos) << e.what();
  }
  try {
    (void)parse_checked(R"(graph @bad(%0: f32[16,1,3,3,4]) {
  %1: f32[1,4,8,6] = winograd_output(%0) {size=[8,6]}
  return %1
})");
    FAIL() << "3x3 tiles were taken for an 8x6 output";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not cover"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
