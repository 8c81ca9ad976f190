// The memory planner: hand-derived naive / lower-bound / planned bytes, no two values live at the
// same time share bytes (every pair checked), in-place reuse, splitting at the device's buffer limit,
// and plans of whole programs on the null backend.
#include <cmath>

#include "core/frontend/run_program.h"
#include "core/runtime/memory_plan.h"
#include "core/runtime/planned_program.h"
#include "runtime_test_util.h"

namespace kiln {
namespace {

using testing::parse_checked;

// Values i and j share bytes legitimately only when one was written in place over the other.
bool same_in_place_chain(const std::vector<PlanValue>& values, const MemoryPlan& plan, size_t i, size_t j) {
  auto root = [&](size_t v) {
    while (plan.placements[v].in_place && values[v].in_place_of >= 0) v = size_t(values[v].in_place_of);
    return v;
  };
  return root(i) == root(j);
}

void expect_no_overlap(const std::vector<PlanValue>& values, const MemoryPlan& plan) {
  ASSERT_EQ(plan.placements.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const Placement& p = plan.placements[i];
    ASSERT_LT(size_t(p.arena), plan.arena_bytes.size());
    EXPECT_LE(p.offset + values[i].bytes, plan.arena_bytes[size_t(p.arena)]) << values[i].name;
    EXPECT_EQ(p.offset % 256, 0u) << values[i].name;
    for (size_t j = i + 1; j < values.size(); ++j) {
      const Placement& q = plan.placements[j];
      bool live_together = values[i].first <= values[j].last && values[j].first <= values[i].last;
      bool share_bytes = p.arena == q.arena && p.offset < q.offset + values[j].bytes &&
                         q.offset < p.offset + values[i].bytes;
      if (live_together && share_bytes)
        EXPECT_TRUE(same_in_place_chain(values, plan, i, j))
            << values[i].name << " and " << values[j].name << " are live at once and overlap";
    }
  }
}

TEST(MemoryPlan, ReusesBytesOfValuesThatAreNeverLiveTogether) {
  // Live at kernel 0: A; 1: A,B; 2: B,C; 3: C,D. Peak 1024+2048 = 3072.
  std::vector<PlanValue> values = {
      {"A", 1024, 0, 1, -1}, {"B", 1024, 1, 2, -1}, {"C", 2048, 2, 3, -1}, {"D", 1024, 3, 3, -1}};
  MemoryPlan plan = plan_memory(values);
  EXPECT_EQ(plan.naive_bytes, 5120);
  EXPECT_EQ(plan.lower_bound_bytes, 3072);
  EXPECT_EQ(plan.planned_bytes, 3072);  // C at 0, A at 0 (before C), B and D at 2048
  EXPECT_EQ(plan.placements[2].offset, 0u);
  EXPECT_EQ(plan.placements[0].offset, 0u);
  EXPECT_EQ(plan.placements[1].offset, 2048u);
  EXPECT_EQ(plan.placements[3].offset, 2048u);
  expect_no_overlap(values, plan);
}

TEST(MemoryPlan, PointwiseChainRunsInPlace) {
  std::vector<PlanValue> values = {{"A", 1024, 0, 1, -1}, {"B", 1024, 1, 2, 0}, {"C", 1024, 2, 3, 1}};
  MemoryPlan plan = plan_memory(values);
  EXPECT_EQ(plan.naive_bytes, 3072);
  EXPECT_EQ(plan.lower_bound_bytes, 1024);
  EXPECT_EQ(plan.planned_bytes, 1024);
  EXPECT_EQ(plan.in_place, 2);
  expect_no_overlap(values, plan);

  MemoryPlanOptions off;
  off.in_place = false;
  MemoryPlan separate = plan_memory(values, off);
  EXPECT_EQ(separate.in_place, 0);
  EXPECT_EQ(separate.planned_bytes, 2048);  // A,B live at 1; B,C at 2; A and C share
  expect_no_overlap(values, separate);
}

TEST(MemoryPlan, InPlaceNeedsTheDonorToDieAndMatchInSize) {
  // B may not take A's bytes: A is read again by kernel 2. C may not take B's: sizes differ.
  std::vector<PlanValue> values = {{"A", 1024, 0, 2, -1}, {"B", 1024, 1, 2, 0}, {"C", 512, 2, 2, 1}};
  MemoryPlan plan = plan_memory(values);
  EXPECT_EQ(plan.in_place, 0);
  EXPECT_EQ(plan.lower_bound_bytes, 2560);
  expect_no_overlap(values, plan);
}

TEST(MemoryPlan, SplitsArenasAtTheDeviceBufferLimit) {
  std::vector<PlanValue> values = {{"A", 1024, 0, 0, -1}, {"B", 1024, 0, 0, -1}, {"C", 1024, 0, 0, -1}};
  MemoryPlanOptions options;
  options.max_buffer_bytes = 2048;
  MemoryPlan plan = plan_memory(values, options);
  EXPECT_EQ(plan.arena_bytes, (std::vector<size_t>{2048, 1024}));
  EXPECT_EQ(plan.planned_bytes, 3072);
  expect_no_overlap(values, plan);

  values.push_back({"%9 f32[1024]", 4096, 0, 0, -1});
  try {
    plan_memory(values, options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("%9 f32[1024]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("largest buffer"), std::string::npos) << e.what();
  }
}

// 64x64 f32 = 16384 bytes per value. Kernels: 0 a=exp(x), 1 b=a@x, 2 c=b@x, 3 d=c@a, 4 e=relu(d).
// a lives 0..3, b 1..2, c 2..3, d 3..4; e is the output and not planned.
const char* kMatmuls = R"(graph @main(%0: f32[64,64] "x") {
  %1: f32[64,64] = exp(%0)
  %2: f32[64,64] = matmul(%1, %0)
  %3: f32[64,64] = matmul(%2, %0)
  %4: f32[64,64] = matmul(%3, %1)
  %5: f32[64,64] = relu(%4)
  return %5
})";

TEST(MemoryPlan, ProgramOnTheNullBackendPlansIntermediatesOnly) {
  Graph g = parse_checked(kMatmuls);
  Device null(BackendKind::Null, 0);
  PlannedProgram program(g, null);
  EXPECT_EQ(program.stats().kernels, 4);  // the relu runs in the last matmul's epilogue
  const MemoryPlan& plan = program.memory_plan();
  // %1..%3: not the input %0, not %4 (never stored), not the output %5.
  EXPECT_EQ(program.plan_values().size(), 3u);
  for (const PlanValue& v : program.plan_values()) {
    EXPECT_EQ(v.name.find("%0 "), std::string::npos);
    EXPECT_EQ(v.name.find("%4 "), std::string::npos);
    EXPECT_EQ(v.name.find("%5 "), std::string::npos);
  }
  EXPECT_EQ(plan.naive_bytes, 3 * 16384);
  EXPECT_EQ(plan.lower_bound_bytes, 3 * 16384);  // kernel 2 reads %2, writes %3, and %1 is read later
  EXPECT_EQ(plan.planned_bytes, 3 * 16384);
  EXPECT_EQ(program.stats().planned_bytes, 3 * 16384);
  expect_no_overlap(program.plan_values(), plan);
  // Runs (launching nothing) with the arenas bound at their offsets.
  std::vector<Tensor> out = run_program(program, {zeros({64, 64}, DType::F32, null)});
  EXPECT_EQ(out.at(0).sizes(), (std::vector<int64_t>{64, 64}));
}

TEST(MemoryPlan, UnfusedPointwiseChainIsPlannedInPlace) {
  Graph g = parse_checked(R"(graph @main(%0: f32[64,64] "x") {
  %1: f32[64,64] = exp(%0)
  %2: f32[64,64] = neg(%1)
  %3: f32[64,64] = tanh(%2)
  %4: f32[64,64] = relu(%3)
  return %4
})");
  ProgramOptions options;
  options.fuse = false;
  PlannedProgram program(g, Device(BackendKind::Null, 0), options);
  EXPECT_EQ(program.stats().kernels, 4);
  const MemoryPlan& plan = program.memory_plan();
  EXPECT_EQ(plan.naive_bytes, 3 * 16384);
  EXPECT_EQ(plan.in_place, 2);  // neg over exp's result, tanh over neg's
  EXPECT_EQ(plan.planned_bytes, 16384);
  EXPECT_LE(plan.planned_bytes, plan.lower_bound_bytes);
  expect_no_overlap(program.plan_values(), plan);

  PlannedProgram fused(g, Device(BackendKind::Null, 0));
  EXPECT_EQ(fused.stats().kernels, 1);
  EXPECT_EQ(fused.stats().planned_bytes, 0);  // nothing between kernels
}

// A reshape of an intermediate is no kernel: its value is the intermediate's bytes with another
// shape. Reading it keeps the intermediate alive, so the neg between may not run in place over it
// (it would, were the reshape's readers not counted: exp(%2) would then read -exp(x)).
TEST(MemoryPlan, ReshapeOfAnIntermediateIsItsBytesAndKeepsThemAlive) {
  Graph g = parse_checked(R"(graph @main(%0: f32[64,64] "x") {
  %1: f32[64,64] = exp(%0)
  %2: f32[32,128] = reshape(%1) {shape=[32,128]}
  %3: f32[64,64] = neg(%1)
  %4: f32[32,128] = exp(%2)
  %5: f32[64,64] = sin(%3)
  return %5, %4
})");
  ProgramOptions options;
  options.fuse = false;
  for (const Device& device : {Device(BackendKind::Null, 0), Device::cpu()}) {
    PlannedProgram program(g, device, options);
    EXPECT_EQ(program.stats().kernels, 4) << device.name();  // exp, neg, exp, sin: no copy for the reshape
    EXPECT_EQ(program.memory_plan().in_place, 0) << device.name();
    expect_no_overlap(program.plan_values(), program.memory_plan());
  }
  Tensor x = randn({64, 64}, Device::cpu(), 7) * 0.5;
  PlannedProgram program(g, Device::cpu(), options);
  std::vector<Tensor> out = run_program(program, {x});
  const std::vector<float> in = x.to_vector<float>(), neg = out.at(0).to_vector<float>(),
                           twice = out.at(1).to_vector<float>();
  ASSERT_EQ(out.at(1).sizes(), (std::vector<int64_t>{32, 128}));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_NEAR(neg[i], std::sin(-std::exp(in[i])), 1e-5f) << i;
    ASSERT_NEAR(twice[i], std::exp(std::exp(in[i])), 1e-5f * std::exp(std::exp(in[i]))) << i;
  }
}

// A reshape whose value is returned is still a copy: the caller owns a buffer of its own.
TEST(MemoryPlan, ReturnedReshapeIsStillACopy) {
  Graph g = parse_checked(R"(graph @main(%0: f32[64,64] "x") {
  %1: f32[64,64] = exp(%0)
  %2: f32[32,128] = reshape(%1) {shape=[32,128]}
  return %2
})");
  ProgramOptions options;
  options.fuse = false;
  PlannedProgram program(g, Device(BackendKind::Null, 0), options);
  EXPECT_EQ(program.stats().kernels, 2);
}

}  // namespace
}  // namespace kiln
