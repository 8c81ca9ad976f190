// Convs as im2col and one matmul per image (core/passes/conv_as_matmul.cpp, core/ir/ops/im2col.h):
// convs the pass rewrites give the direct conv's values on every device, against the reference
// interpreter's direct conv as the oracle; convs it cannot rewrite stay convs; lavapipe picks a
// first conv (7x7 over 3 channels) and leaves a 3x3 one over 3 channels to the conv template.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/kiln.h"
#include "core/passes/pass.h"
#include "core/passes/passes.h"
#include "core/runtime/compile_graph.h"
#include "support/devices.h"
#include "support/rewrite_checks.h"

namespace kiln {
namespace {

using testing::count_ops;
using testing::parse_checked;

// A first conv as ResNet's (7x7, stride 2, padding 3, 3 channels padded to 4 in the columns, a
// bias), one with dilation, asymmetric padding and 5 channels, a 1-d conv with a stride, one whose
// channels need no padding, and a grouped conv, which stays a conv.
const char* kConvs = R"(graph @convs(%0: f32[2,3,20,18] "x", %1: f32[8,3,7,7] "w", %2: f32[8] "b",
                                     %3: f32[1,5,9,10] "x2", %4: f32[6,5,3,3] "w2", %5: f32[2,3,17] "x3",
                                     %6: f32[4,3,5] "w3", %7: f32[1,8,6,6] "x4", %8: f32[4,8,2,2] "w4",
                                     %9: f32[4,4,3,3] "w5") {
  %10: f32[2,8,10,9] = conv(%0, %1, %2) {channels_last=false, dilation=[1,1], groups=1, padding=[3,3,3,3], stride=[2,2]}
  %11: f32[1,6,6,9] = conv(%3, %4) {channels_last=false, dilation=[2,1], groups=1, padding=[1,0,0,1], stride=[1,1]}
  %12: f32[2,4,8] = conv(%5, %6) {channels_last=false, dilation=[1], groups=1, padding=[2,1], stride=[2]}
  %13: f32[1,4,5,5] = conv(%7, %8) {channels_last=false, dilation=[1,1], groups=1, padding=[0,0,0,0], stride=[1,1]}
  %14: f32[1,4,6,6] = conv(%7, %9) {channels_last=false, dilation=[1,1], groups=2, padding=[1,1,1,1], stride=[1,1]}
  return %10, %11, %12, %13, %14
})";

TEST(ConvAsMatmul, RewrittenConvsMatchTheDirectConvOnEveryDevice) {
  const Graph original = parse_checked(kConvs);
  Graph rewritten = original.clone();
  run_pipeline(rewritten, {conv_as_matmul_pass([](const Node&) { return true; })}, {});
  ASSERT_EQ(count_ops(rewritten, OpKind::Conv), 1) << "the grouped conv stays";
  ASSERT_EQ(count_ops(rewritten, OpKind::MatMul), 4);
  ASSERT_EQ(count_ops(rewritten, OpKind::IndexSelect), 4);

  const std::vector<Tensor> inputs = {
      randn({2, 3, 20, 18}, Device::ref(), 1), randn({8, 3, 7, 7}, Device::ref(), 2), randn({8}, Device::ref(), 3),
      randn({1, 5, 9, 10}, Device::ref(), 4),  randn({6, 5, 3, 3}, Device::ref(), 5), randn({2, 3, 17}, Device::ref(), 6),
      randn({4, 3, 5}, Device::ref(), 7),      randn({1, 8, 6, 6}, Device::ref(), 8), randn({4, 8, 2, 2}, Device::ref(), 9),
      randn({4, 4, 3, 3}, Device::ref(), 10)};
  // Sums of at most 147 products of N(0, 1) values, added in another order than the direct conv's.
  testing::expect_rewrite_matches_on_every_device(original, rewritten, inputs, 1e-4);
}

// The backend's choice, through compile_graph: on lavapipe the 7x7 conv over 3 channels becomes a
// matmul, the 3x3 one over 3 channels and the one over 16 channels stay convs. Other devices keep them all.
TEST(ConvAsMatmul, LavapipePicksConvsWithFewChannelsAndALargeWindow) {
  if (std::getenv("KILN_CONV_AS_MATMUL")) GTEST_SKIP() << "KILN_CONV_AS_MATMUL is set";
  const char* text = R"(graph @convs(%0: f32[1,3,32,32] "x", %1: f32[8,3,7,7] "w", %2: f32[8,3,3,3] "w2",
                                     %3: f32[1,16,16,16] "x2", %4: f32[8,16,7,7] "w3") {
  %5: f32[1,8,16,16] = conv(%0, %1) {channels_last=false, dilation=[1,1], groups=1, padding=[3,3,3,3], stride=[2,2]}
  %6: f32[1,8,32,32] = conv(%0, %2) {channels_last=false, dilation=[1,1], groups=1, padding=[1,1,1,1], stride=[1,1]}
  %7: f32[1,8,16,16] = conv(%3, %4) {channels_last=false, dilation=[1,1], groups=1, padding=[3,3,3,3], stride=[1,1]}
  return %5, %6, %7
})";
  for (const Device& device : testing::computing_devices()) {
    SCOPED_TRACE(device.name());
    Graph g = parse_checked(text);
    CompiledGraph compiled = compile_graph(g, device);
    int64_t rewritten = -1;  // no such pass: the device generates no code (ref)
    for (const PassRecord& pass : compiled.passes)
      if (pass.name == "conv-as-matmul") rewritten = pass.stats.counters.at("convs_rewritten");
    const bool software_vulkan = device.kind() == BackendKind::Vulkan && device.backend().caps().is_cpu;
    EXPECT_EQ(rewritten, device.kind() == BackendKind::Ref ? -1 : software_vulkan ? 1 : 0);
    EXPECT_EQ(count_ops(g, OpKind::Conv), software_vulkan ? 2 : 3);
  }
}

}  // namespace
}  // namespace kiln
