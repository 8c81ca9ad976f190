// A compiled while_loop on Vulkan keeps its predicate on the device (core/runtime/device_loop.h):
// results match the loop computed by hand and the reference interpreter, and the host waits once
// per batch of iterations (device_loop.h) where the host loop waits once per iteration.
// The suite's sync-validation run checks the barriers before the indirect dispatches.
#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/ir/op.h"
#include "core/runtime/while_loop.h"
#include "runtime_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::parse_checked;

// x += step while sum(x) < 100.
const char* kAccumulate = R"(graph @loop(%0: f32[1,3] "x", %1: f32[3] "step") {
  %2: f32[1,3] = while_loop(%0, %1) {body=graph @body(%0: f32[1,3], %1: f32[3]) {
      %2: f32[1,3] = add(%0, %1)
      return %2
    }, carried=1, cond=graph @cond(%0: f32[1,3], %1: f32[3]) {
      %2: f32[] = sum(%0) {dims=[], keepdim=false}
      %3: f32[] = constant() {value=dense<f32[]>[100.0]}
      %4: bool[] = lt(%2, %3)
      return %4
    }}
  return %2
})";

// n times x = tanh(x @ w), counted in a carried i32: two carried values of two types, a matmul
// (the backend's template) and a captured bound.
const char* kCountedMatmul = R"(graph @loop(%0: f32[4,8] "x", %1: i32[] "i", %2: f32[8,8] "w", %3: i32[] "n") {
  %4, %5: f32[4,8], i32[] = while_loop(%0, %1, %2, %3) {body=graph @body(%0: f32[4,8], %1: i32[], %2: f32[8,8], %3: i32[]) {
      %4: f32[4,8] = matmul(%0, %2)
      %5: f32[4,8] = tanh(%4)
      %6: i32[] = constant() {value=dense<i32[]>[1]}
      %7: i32[] = add(%1, %6)
      return %5, %7
    }, carried=2, cond=graph @cond(%0: f32[4,8], %1: i32[], %2: f32[8,8], %3: i32[]) {
      %4: bool[] = lt(%1, %3)
      return %4
    }}
  return %4, %5
})";

const Node& loop_node(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->kind == OpKind::WhileLoop) return *n;
  throw Error("test graph has no while_loop");
}

TEST(DeviceLoop, VulkanLoopMatchesTheLoopByHandAndWaitsOncePerBatch) {
  KILN_REQUIRE_VULKAN(vk);
  ASSERT_TRUE(vk.backend().caps().indirect_launch);
  const Graph g = parse_checked(kAccumulate);
  const Node& node = loop_node(g);
  const Tensor step = from_vector<float>({1, 1, 1}, {3}, vk);
  // x0 = [a, 0, 0]: sum(x) grows by 3 per iteration, so the loop runs n = ceil((100 - a) / 3) times.
  // A first run queues batches of 1, 2, 4, 8, 16, 32, 64 iterations (1, 3, 7, 15, 31, 63, 127 in
  // all) and needs the batch that holds iteration n, whose predicate is false: n + 1 queued. A
  // second run queues n + 1 at once, in batches of at most 64.
  struct Case {
    float start;
    int iterations, first_run_waits, second_run_waits;
  };
  for (const Case& c : {Case{100, 0, 1, 1}, Case{99, 1, 2, 1}, Case{96, 2, 2, 1}, Case{0, 34, 6, 1},
                        Case{-200, 100, 7, 2}}) {
    CompiledWhileLoop loop(node.attrs, node.provenance, vk, {}, "");
    const float n = float(c.iterations);
    for (int run = 0; run < 2; ++run) {
      const std::vector<Tensor> got =
          tensors_of(loop.run(device_tensors({from_vector<float>({c.start, 0, 0}, {1, 3}, vk), step})));
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].to_vector<float>(), (std::vector<float>{c.start + n, n, n})) << "start " << c.start;
      EXPECT_EQ(loop.host_waits(), c.first_run_waits + run * c.second_run_waits)
          << "start " << c.start << ", run " << run;
    }
  }
  // The host loop on cpu reads every iteration's predicate: n + 1 waits.
  CompiledWhileLoop on_cpu(node.attrs, node.provenance, Device::cpu(), {}, "");
  const std::vector<Tensor> got = tensors_of(
      on_cpu.run(device_tensors({from_vector<float>({0, 0, 0}, {1, 3}), from_vector<float>({1, 1, 1}, {3})})));
  EXPECT_EQ(got[0].to_vector<float>(), (std::vector<float>{34, 34, 34}));
  EXPECT_EQ(on_cpu.host_waits(), 35);
}

TEST(DeviceLoop, VulkanLoopWithATemplateAndTwoCarriedTypesMatchesTheReference) {
  KILN_REQUIRE_VULKAN(vk);
  const Graph g = parse_checked(kCountedMatmul);
  const std::unique_ptr<DeviceProgram> program = build_program(g, vk);
  for (int32_t n : {0, 1, 5, 23}) {
    const std::vector<Tensor> host = {randn({4, 8}, Device::ref(), 7), from_vector<int32_t>({0}, {}, Device::ref()),
                                      randn({8, 8}, Device::ref(), 8) * 0.5,
                                      from_vector<int32_t>({n}, {}, Device::ref())};
    const std::vector<Tensor> want = interpret(g, host);
    std::vector<Tensor> on_vk;
    for (const Tensor& t : host) on_vk.push_back(t.to(vk));
    const std::vector<Tensor> got = run_program(*program, on_vk);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[1].to_vector<int32_t>(), (std::vector<int32_t>{n}));
    EXPECT_EQ(want[1].to_vector<int32_t>(), (std::vector<int32_t>{n}));
    // Matmul sums in another order than the reference's: 1e-5 per step, 23 steps.
    expect_close(got[0].to_vector<float>(), want[0].to_vector<float>(), 1e-4f, 1e-4f);
  }
}

}  // namespace
}  // namespace kiln
