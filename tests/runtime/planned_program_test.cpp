// The planned program: every node lands in exactly one kernel; results match the cpu reference on
// Vulkan in the default and reduce_overhead modes, across calls with new values (earlier results
// and the inputs left intact) and re-recording only when the batch dim changes; timings of a
// 10-op pointwise chain eager vs planned vs reduce_overhead.
#include <chrono>
#include <set>

#include "core/frontend/interpreter.h"
#include "core/frontend/run_program.h"
#include "core/runtime/planned_program.h"
#include "runtime_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::parse_checked;

const char* kMixed = R"(graph @main(%0: f32[s0,16] "x", %1: f32[16,8] "w", %2: f32[8] "b") symbols(s0=4) {
  %3: f32[] = constant() {value=dense<f32[]>[2.0]}
  %4: f32[s0,16] = mul(%0, %3)
  %5: f32[s0,16] = tanh(%4)
  %6: f32[s0,8] = matmul(%5, %1)
  %7: f32[s0,8] = add(%6, %2)
  %8: f32[s0,8] = relu(%7)
  %9: f32[s0] = sum(%8) {dims=[1], keepdim=false}
  %10: f32[s0,8] = sigmoid(%6)
  return %9, %10
})";

std::vector<Tensor> inputs_for(int64_t batch, Device device, int seed) {
  return {randn({batch, 16}, device, uint64_t(seed)), randn({16, 8}, device, 100),
          randn({8}, device, 101)};
}

std::vector<Tensor> to_device(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.to(d));
  return out;
}

TEST(PlannedProgram, EveryNodeIsInExactlyOneKernel) {
  Graph g = parse_checked(kMixed);
  PlannedProgram program(g, Device(BackendKind::Null, 0));
  std::map<int, int> seen;
  for (const PlannedKernel& k : program.kernels())
    for (int id : k.origins) ++seen[id];
  for (int id : program.constant_nodes()) ++seen[id];
  for (const Node* n : g.nodes()) EXPECT_EQ(seen[n->id], 1) << "node %" << n->id << " " << op_name(n->kind);
  EXPECT_EQ(seen.size(), g.num_nodes());
  // [mul,tanh] [matmul] [add,relu,sum] [sigmoid]; the constant is uploaded, not launched.
  EXPECT_EQ(program.stats().kernels, 4);
  EXPECT_EQ(program.constant_nodes().size(), 1u);
}

TEST(PlannedProgram, UnknownShapesAndDevicesAreRejectedClearly) {
  Graph g = parse_checked(kMixed);
  PlannedProgram program(g, Device(BackendKind::Null, 0));
  Device null(BackendKind::Null, 0);
  try {
    run_program(program,
                {zeros({4, 15}, DType::F32, null), zeros({16, 8}, DType::F32, null), zeros({8}, DType::F32, null)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 should be f32[s0,16], got f32[4,15]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_program(program, inputs_for(4, Device::cpu(), 1)), Error);  // cpu tensors, null program
}

void check_against_cpu(PlannedProgram& program, const Graph& g, int64_t batch, Device vk, int seed) {
  std::vector<Tensor> host = inputs_for(batch, Device::cpu(), seed);
  std::vector<Tensor> want = interpret(g, host);
  std::vector<Tensor> vk_in = to_device(host, vk);
  std::vector<Tensor> got = run_program(program, vk_in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sizes(), want[i].sizes());
    expect_close(got[i].to_vector<float>(), want[i].to_vector<float>(), 1e-4f, 1e-4f);
  }
  for (size_t i = 0; i < host.size(); ++i)  // never written
    EXPECT_EQ(vk_in[i].to_vector<float>(), host[i].to_vector<float>());
}

TEST(PlannedProgram, DefaultModeMatchesTheCpuReferenceOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  Graph g = parse_checked(kMixed);
  PlannedProgram program(g, vk);
  for (int64_t batch : {4, 4, 9, 1}) check_against_cpu(program, g, batch, vk, int(batch) + 3);
}

// A kernel that reads only a parameter (tanh of a weight) is kept between runs (kept_kernels.h):
// it runs again only for a new weight buffer, its result stays alive over the whole memory plan,
// and with no parameter inputs, or with reduce_overhead, nothing is kept. On every code-generating
// device; values against the interpreter on cpu at each run.
TEST(PlannedProgram, KernelsOfParametersOnlyRunOncePerSetOfWeights) {
  Graph g = parse_checked(R"(graph @main(%0: f32[4,8] "x", %1: f32[8,6] "w") {
  %2: f32[8,6] = tanh(%1)
  %3: f32[4,6] = matmul(%0, %2)
  return %3
})");
  std::vector<Device> devices = {Device::cpu()};
  if (std::optional<Device> vk = testing::vulkan_device()) devices.push_back(*vk);
  for (const Device& device : devices) {
    SCOPED_TRACE(device.name());
    ProgramOptions options;
    options.parameter_inputs = {1};
    PlannedProgram program(g, device, options);
    Tensor w = randn({8, 6}, device, 2);
    auto check = [&](uint64_t seed) {
      std::vector<Tensor> in = {randn({4, 8}, device, seed), w};
      std::vector<Tensor> host = {in[0].to(Device::cpu()), in[1].to(Device::cpu())};
      expect_close(run_program(program, in)[0].to_vector<float>(), interpret(g, host)[0].to_vector<float>(), 1e-5f, 1e-5f);
    };
    check(1);
    EXPECT_EQ(program.kept_launches(), 0);
    check(3);  // new data, the same weight: tanh(w) is kept
    EXPECT_EQ(program.kept_launches(), 1);
    w = randn({8, 6}, device, 4);  // a new weight: computed again, then kept
    check(5);
    EXPECT_EQ(program.kept_launches(), 1);
    check(6);
    EXPECT_EQ(program.kept_launches(), 2);
    bool alive_throughout = false;
    for (size_t i = 0; i < program.plan_values().size(); ++i)
      if (program.plan_value_ids()[i] == 2)
        alive_throughout = program.plan_values()[i].first == 0 &&
                           program.plan_values()[i].last == int(program.kernels().size()) - 1;
    EXPECT_TRUE(alive_throughout) << "the kept value spans the memory plan";

    for (bool reduce_overhead : {false, true}) {
      ProgramOptions other;
      other.reduce_overhead = reduce_overhead;
      if (reduce_overhead) other.parameter_inputs = {1};
      PlannedProgram unkept(g, device, other);
      for (uint64_t seed : {7, 8}) run_program(unkept, {randn({4, 8}, device, seed), w});
      EXPECT_EQ(unkept.kept_launches(), 0) << (reduce_overhead ? "reduce_overhead" : "no parameter inputs");
    }
  }
}

// Record/replay (Vulkan command buffers, CUDA graphs): replays leave earlier results alone and a new
// batch size records again.
void expect_replays_and_rerecords_on_batch_change(Device vk) {
  Graph g = parse_checked(kMixed);
  ProgramOptions options;
  options.reduce_overhead = true;
  PlannedProgram program(g, vk, options);

  std::vector<Tensor> host_a = inputs_for(4, Device::cpu(), 1), host_b = inputs_for(4, Device::cpu(), 2);
  std::vector<Tensor> got_a = run_program(program, to_device(host_a, vk));
  std::vector<float> first = got_a[1].to_vector<float>();
  std::vector<Tensor> got_b = run_program(program, to_device(host_b, vk));
  EXPECT_EQ(program.recordings(), 1);
  expect_close(got_b[1].to_vector<float>(), interpret(g, host_b)[1].to_vector<float>(), 1e-4f, 1e-4f);
  expect_close(got_b[0].to_vector<float>(), interpret(g, host_b)[0].to_vector<float>(), 1e-4f, 1e-4f);
  EXPECT_EQ(got_a[1].to_vector<float>(), first);  // the replay did not overwrite the first result
  EXPECT_NE(got_a[1].to_vector<float>(), got_b[1].to_vector<float>());

  check_against_cpu(program, g, 4, vk, 3);
  EXPECT_EQ(program.recordings(), 1);
  check_against_cpu(program, g, 7, vk, 4);
  EXPECT_EQ(program.recordings(), 2);
  check_against_cpu(program, g, 7, vk, 5);
  EXPECT_EQ(program.recordings(), 2);
  check_against_cpu(program, g, 4, vk, 6);
  EXPECT_EQ(program.recordings(), 3);
}

TEST(PlannedProgram, ReduceOverheadReplaysAndRerecordsOnlyWhenTheBatchChanges) {
  KILN_REQUIRE_VULKAN(vk);
  expect_replays_and_rerecords_on_batch_change(vk);
}

TEST(PlannedProgram, CudaGraphsReplayAndRecaptureOnlyWhenTheBatchChanges) {
  std::optional<Device> cuda = testing::cuda_device();
  if (!cuda) {
    std::string why;
    try {
      Device::parse("cuda");
    } catch (const Error& e) {
      why = e.what();
    }
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  expect_replays_and_rerecords_on_batch_change(*cuda);
}

TEST(PlannedProgram, BuildProgramPicksThePlannedProgramOnlyForCodeGeneratingDevices) {
  Graph g = parse_checked(kMixed);
  EXPECT_EQ(build_program(g, Device::ref())->stats().kernels, int64_t(g.num_nodes()));  // the interpreter
  EXPECT_EQ(build_program(g, Device::cpu())->stats().kernels, 4);
  if (auto vk = testing::vulkan_device()) EXPECT_EQ(build_program(g, *vk)->stats().kernels, 4);
}

// 10 pointwise ops on [256,1024]: eager (one launch + wait per op), planned (1 kernel), recorded.
const char* kChain10 = R"(graph @main(%0: f32[256,1024] "x", %1: f32[1024] "b") {
  %2: f32[256,1024] = add(%0, %1)
  %3: f32[256,1024] = mul(%2, %0)
  %4: f32[256,1024] = tanh(%3)
  %5: f32[256,1024] = sigmoid(%4)
  %6: f32[256,1024] = sub(%5, %1)
  %7: f32[256,1024] = relu(%6)
  %8: f32[256,1024] = neg(%7)
  %9: f32[256,1024] = abs(%8)
  %10: f32[256,1024] = add(%9, %0)
  %11: f32[256,1024] = mul(%10, %10)
  return %11
})";

double ms_per_call(const std::function<void()>& f, int calls) {
  f();  // warm: compiles, allocations, recording
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / calls;
}

TEST(PlannedProgram, TenOpChainTimingsEagerVsPlannedVsReduceOverhead) {
  KILN_REQUIRE_VULKAN(vk);
  Graph g = parse_checked(kChain10);
  std::vector<Tensor> host = {randn({256, 1024}, Device::cpu(), 1), randn({1024}, Device::cpu(), 2)};
  std::vector<Tensor> in = to_device(host, vk);
  ProgramOptions unfused_options;
  unfused_options.fuse = false;
  PlannedProgram unfused(g, vk, unfused_options);
  PlannedProgram planned(g, vk);
  ProgramOptions ro;
  ro.reduce_overhead = true;
  PlannedProgram recorded(g, vk, ro);
  EXPECT_EQ(unfused.stats().kernels, 10);
  EXPECT_EQ(planned.stats().kernels, 1);
  std::vector<float> want = interpret(g, host)[0].to_vector<float>();
  expect_close(run_program(planned, in)[0].to_vector<float>(), want, 1e-4f, 1e-5f);
  expect_close(run_program(recorded, in)[0].to_vector<float>(), want, 1e-4f, 1e-5f);

  const int calls = 20;
  double eager = ms_per_call([&] { interpret(g, in)[0].to_vector<float>(); }, calls);
  double plain = ms_per_call([&] { run_program(unfused, in)[0].to_vector<float>(); }, calls);
  double fused = ms_per_call([&] { run_program(planned, in)[0].to_vector<float>(); }, calls);
  double replay = ms_per_call([&] { run_program(recorded, in)[0].to_vector<float>(); }, calls);
  // Two different x tensors alternating: the input copy runs every call.
  std::vector<Tensor> other = {randn({256, 1024}, Device::cpu(), 3).to(vk), in[1]};
  int call = 0;
  double replay_new =
      ms_per_call([&] { run_program(recorded, ++call % 2 ? other : in)[0].to_vector<float>(); }, calls);
  std::printf("10-op chain f32[256,1024] on %s, ms per call incl. read-back (kernels):\n"
              "  eager %.3f (10)  planned unfused %.3f (10)  planned fused %.3f (1)\n"
              "  reduce_overhead %.3f (1, same x: no input copy)  %.3f (1, new x each call)\n"
              "  memory: unfused %s\n",
              vk.description().c_str(), eager, plain, fused, replay, replay_new,
              unfused.memory_plan().str().c_str());
}

}  // namespace
}  // namespace kiln
