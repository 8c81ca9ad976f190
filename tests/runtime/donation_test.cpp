// Donated inputs (core/runtime/donation.h): which outputs a program may write over its inputs'
// buffers, as text, and runs that do so only when the caller donates the buffer. The oracle for
// the values is the update worked out by hand.
#include "core/runtime/compile_graph.h"
#include "core/runtime/planned_program.h"
#include "runtime_test_util.h"

namespace kiln {
namespace {

using testing::parse_checked;

// An SGD step's shape: p is read by the forward (broadcast over x's rows), then replaced by
// p - 0.1 * (0.9 m + g); m is replaced by 0.9 m + g.
const char* kStep = R"(graph @main(%0: f32[64] "p", %1: f32[64] "m", %2: f32[64] "g", %3: f32[8,64] "x") {
  %4: f32[8,64] = mul(%3, %0)
  %5: f32[8] = sum(%4) {dims=[1], keepdim=false}
  %6: f32[] = constant() {value=dense<f32[]>[0.9]}
  %7: f32[64] = mul(%1, %6)
  %8: f32[64] = add(%7, %2)
  %9: f32[] = constant() {value=dense<f32[]>[0.1]}
  %10: f32[64] = mul(%8, %9)
  %11: f32[64] = sub(%0, %10)
  return %5, %11, %8
})";

std::string safe_pairs(const char* graph_text, const std::vector<OutputOverInput>& candidates) {
  Graph g = parse_checked(graph_text);
  ProgramOptions options;
  options.outputs_over_inputs = candidates;
  ProgramStages stages = run_program_stages(g, Device::cpu().backend(), options);
  return print_outputs_over_inputs(stages.program, stages.program.outputs_over_inputs);
}

TEST(Donation, AnUpdateReadingItsInputElementWiseAfterEveryOtherReaderIsSafe) {
  EXPECT_EQ(safe_pairs(kStep, {{1, 0}, {2, 1}}),
            "output 1 over input 0 (%11 f32[64])\n"
            "output 2 over input 1 (%8 f32[64])\n");
}

TEST(Donation, UnsafePairsAreDropped) {
  // A kernel after the update still reads p.
  EXPECT_EQ(safe_pairs(R"(graph @main(%0: f32[64] "p", %1: f32[8,64] "x") {
  %2: f32[64] = neg(%0)
  %3: f32[8,64] = mul(%1, %2)
  %4: f32[8,64] = mul(%3, %0)
  %5: f32[8] = sum(%4) {dims=[1], keepdim=false}
  return %2, %5
})", {{0, 0}}), "");
  // The update reads p transposed: other elements than the one it writes.
  EXPECT_EQ(safe_pairs(R"(graph @main(%0: f32[8,8] "p") {
  %1: f32[8,8] = permute(%0) {dims=[1,0]}
  %2: f32[] = constant() {value=dense<f32[]>[1.0]}
  %3: f32[8,8] = add(%1, %2)
  return %3
})", {{0, 0}}), "");
  // Another shape, and an input that is also returned as it is.
  const char* returned = R"(graph @main(%0: f32[64] "p", %1: f32[32] "q") {
  %2: f32[32] = neg(%1)
  %3: f32[64] = neg(%0)
  return %2, %0, %3
})";
  EXPECT_EQ(safe_pairs(returned, {{0, 0}, {2, 0}}), "");
  EXPECT_EQ(safe_pairs(returned, {{2, 0}}), "");
  // One kernel stores neg(q), then exp(p) + q, which loads p after the first store: only the
  // second store may go over p. Each input serves one output.
  const char* later_load = R"(graph @main(%0: f32[64] "p", %1: f32[64] "q") {
  %2: f32[64] = neg(%1)
  %3: f32[64] = exp(%0)
  %4: f32[64] = add(%3, %1)
  return %2, %4
})";
  EXPECT_EQ(safe_pairs(later_load, {{0, 0}}), "");
  EXPECT_EQ(safe_pairs(later_load, {{0, 0}, {1, 0}}), "output 1 over input 0 (%4 f32[64])\n");
  // neg(p) and exp(p) share one load of p, which the kernel reads before its first store: either
  // output may go over p, the first one asked for takes it.
  const char* shared_load = R"(graph @main(%0: f32[64] "p") {
  %1: f32[64] = neg(%0)
  %2: f32[64] = exp(%0)
  return %1, %2
})";
  EXPECT_EQ(safe_pairs(shared_load, {{1, 0}}), "output 1 over input 0 (%2 f32[64])\n");
  EXPECT_EQ(safe_pairs(shared_load, {{0, 0}, {1, 0}}), "output 0 over input 0 (%1 f32[64])\n");
}

std::vector<float> ramp(int n, float scale) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(scale * float(i % 7) - 1.0f);
  return v;
}

void check_step_runs(Device device) {
  Graph g = parse_checked(kStep);
  ProgramOptions options;
  options.outputs_over_inputs = {{1, 0}, {2, 1}};
  PlannedProgram program(g, device, options);
  const std::vector<float> p = ramp(64, 0.5f), m = ramp(64, 0.25f), grad = ramp(64, -0.125f), x = ramp(512, 0.1f);
  std::vector<float> want_p, want_m;
  for (size_t i = 0; i < 64; ++i) {
    want_m.push_back(0.9f * m[i] + grad[i]);
    want_p.push_back(p[i] - 0.1f * want_m.back());
  }
  for (bool donate : {false, true}) {
    SCOPED_TRACE(donate ? "donated" : "not donated");
    std::vector<DeviceTensor> in = {DeviceTensor::upload({DType::F32, {64}}, p.data(), device),
                                    DeviceTensor::upload({DType::F32, {64}}, m.data(), device),
                                    DeviceTensor::upload({DType::F32, {64}}, grad.data(), device),
                                    DeviceTensor::upload({DType::F32, {8, 64}}, x.data(), device)};
    in[0].donated = in[1].donated = donate;
    std::vector<DeviceTensor> out = program.run(in);
    testing::expect_close(out[1].to_host<float>(), want_p);
    testing::expect_close(out[2].to_host<float>(), want_m);
    EXPECT_EQ(out[1].buffer == in[0].buffer, donate);
    EXPECT_EQ(out[2].buffer == in[1].buffer, donate);
    if (!donate) testing::expect_close(in[0].to_host<float>(), p);  // left as it was
  }
}

TEST(Donation, ADonatedInputsBufferTakesTheUpdateOnCpu) { check_step_runs(Device::cpu()); }

TEST(Donation, ADonatedInputsBufferTakesTheUpdateOnVulkan) {
  KILN_REQUIRE_VULKAN(device);
  check_step_runs(device);
}

}  // namespace
}  // namespace kiln
