// Horizontal fusion: which kernels become one launch, as text, and that a horizontal kernel
// computes what its members did, on the host evaluator and on each device against ref.
#include "core/frontend/run_program.h"
#include "core/kernel/emit.h"
#include "core/kernel/evaluate.h"
#include "core/kernel/kernel_text.h"
#include "core/runtime/horizontal_fusion.h"
#include "core/frontend/interpreter.h"
#include "core/runtime/planned_program.h"
#include "runtime_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::parse_checked;

// Three parameters' SGD steps (w - lr * g) with one learning rate: independent kernels of three
// shapes, each elementwise but for the scalar.
const char* kUpdates = R"(graph @main(%0: f32[4,8] "w1", %1: f32[4,8] "g1", %2: f32[16] "w2", %3: f32[16] "g2",
                           %4: f32[3,2,5] "w3", %5: f32[3,2,5] "g3", %6: f32[] "lr") {
  %7: f32[4,8] = mul(%1, %6)
  %8: f32[4,8] = sub(%0, %7)
  %9: f32[16] = mul(%3, %6)
  %10: f32[16] = sub(%2, %9)
  %11: f32[3,2,5] = mul(%5, %6)
  %12: f32[3,2,5] = sub(%4, %11)
  return %8, %10, %12
})";

// Adam-style: each parameter's update reads a scalar made just before it from its own step count.
// The scalars run first, as one kernel, then the updates, as another.
const char* kInterleaved = R"(graph @main(%0: f32[4,8] "w1", %1: f32[4,8] "g1", %2: f32[] "t1",
                                %3: f32[16] "w2", %4: f32[16] "g2", %5: f32[] "t2") {
  %6: f32[] = mul(%2, %2)
  %7: f32[4,8] = mul(%1, %6)
  %8: f32[4,8] = sub(%0, %7)
  %9: f32[] = mul(%5, %5)
  %10: f32[16] = mul(%4, %9)
  %11: f32[16] = sub(%3, %10)
  return %8, %11
})";

// %8 needs the sum, which needs %2's kernel: the two pointwise kernels cannot share a launch.
const char* kDependent = R"(graph @main(%0: f32[6] "x", %1: f32[5] "y") {
  %2: f32[6] = neg(%0)
  %3: f32[] = sum(%2) {dims=[0], keepdim=false}
  %4: f32[5] = mul(%1, %3)
  return %4, %2
})";

// The add reads b at a coordinate (a broadcast along rows): it keeps its own launch, and the two
// kernels of other shapes share one.
const char* kBroadcast = R"(graph @main(%0: f32[4,8] "x", %1: f32[8] "b", %2: f32[16] "y", %3: f32[10] "z") {
  %4: f32[4,8] = add(%0, %1)
  %5: f32[16] = exp(%2)
  %6: f32[10] = tanh(%3)
  return %4, %5, %6
})";

// The tanh's result is a 32 KiB intermediate (two reductions read it). It could run with the
// scalar %4, but it would then be made before the update %5 and held longer: it joins the update.
const char* kLargeIntermediate = R"(graph @main(%0: f32[4,8] "g", %1: f32[] "t", %2: f32[8192] "z") {
  %3: f32[] = mul(%1, %1)
  %4: f32[4,8] = mul(%0, %3)
  %5: f32[8192] = tanh(%2)
  %6: f32[] = sum(%5) {dims=[0], keepdim=false}
  %7: f32[] = max(%5) {dims=[0], keepdim=false}
  return %4, %6, %7
})";

LoweredProgram lowered(const Graph& g, Device device) {
  return lower_schedule(g, schedule_kernels(g, device.backend()));
}

std::vector<Tensor> update_inputs(Device device) {
  return {randn({4, 8}, device, 1), randn({4, 8}, device, 2), randn({16}, device, 3), randn({16}, device, 4),
          randn({3, 2, 5}, device, 5), randn({3, 2, 5}, device, 6), from_vector<float>({0.25f}, {}, device)};
}

TEST(HorizontalFusion, IndependentUpdatesBecomeOneKernelOfThreeSegments) {
  Graph g = parse_checked(kUpdates);
  LoweredProgram program = lowered(g, Device::cpu());
  ASSERT_EQ(program.kernels.size(), 3u);
  const kernel::CodegenTarget target{kernel::Dialect::Cpp};
  EXPECT_EQ(fuse_horizontal(program, target, {}), 2);
  ASSERT_EQ(program.kernels.size(), 1u);
  EXPECT_EQ(print_horizontal(program),
            "kernel 0 horizontal: 3 segments over 78 elements, nodes %7 mul %8 sub %9 mul %10 sub %11 mul %12 sub\n");
  const ProgramStep& step = program.kernels[0].steps[0];
  const std::string text = kernel::print_kernel(step.kernel);
  // The extent, the starts of segments 1 and 2, then each segment's size.
  EXPECT_NE(text.find("horizontal(rank 1, params [78, 32, 48, 32, 16, 30])"), std::string::npos) << text;
  EXPECT_NE(text.find("segment 0 [0, p3):"), std::string::npos) << text;
  EXPECT_NE(text.find("segment 2 [p2, p2 + p5):"), std::string::npos) << text;
  // The learning rate is bound once; each parameter and gradient once; three outputs.
  EXPECT_EQ(step.args.size(), 10u);
  EXPECT_EQ(program.kernel_info[0].writes, (std::vector<int>{8, 10, 12}));
}

// In C++ each segment is a loop whose int induction variable runs over the segment's own indices:
// GCC 12 vectorizes that loop, and did not vectorize `int gid = int(hgid) - start` over a long.
TEST(HorizontalFusion, CppSegmentsLoopOverTheirOwnIndices) {
  Graph g = parse_checked(kUpdates);
  LoweredProgram program = lowered(g, Device::cpu());
  const kernel::CodegenTarget target{kernel::Dialect::Cpp};
  EXPECT_EQ(fuse_horizontal(program, target, {}), 2);
  ASSERT_EQ(program.kernels.size(), 1u);
  const kernel::LoweredKernel& lk = program.kernels[0].steps[0].kernel;
  kernel::EmitOptions options = kernel::emit_options_for(target);
  options.static_params = lk.static_param_values();
  const std::string source = kernel::emit(lk.kernel, options).source;
  EXPECT_NE(source.find("for (int gid = int(max(begin, long(32)) - long(32)), gend = int(min(end, long(32) + 16) - "
                        "long(32)); gid < gend; ++gid) {"),
            std::string::npos)
      << source;
  EXPECT_EQ(source.find("hgid"), std::string::npos) << source;
}

// Where pointwise kernels are vec4 (lavapipe), segments start at multiples of 4, so each keeps 4
// elements per invocation: w3's 30 elements take 32 of the extent.
TEST(HorizontalFusion, Vec4TargetsAlignSegmentsAndKeepVec4Code) {
  Graph g = parse_checked(kUpdates);
  LoweredProgram program = lowered(g, Device::cpu());
  kernel::CodegenTarget target{kernel::Dialect::Glsl, /*texel_reads=*/true, /*vec4_pointwise=*/true};
  EXPECT_EQ(fuse_horizontal(program, target, {}), 2);
  ASSERT_EQ(program.kernels.size(), 1u);
  const kernel::LoweredKernel& lk = program.kernels[0].steps[0].kernel;
  EXPECT_NE(kernel::print_kernel(lk).find("params [80, 32, 48, 32, 16, 30]"), std::string::npos);
  const std::string glsl = kernel::emit(lk.kernel, kernel::emit_options_for(target)).source;
  EXPECT_NE(glsl.find("int hgid = int(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * "
                      "256u) * 4;"),
            std::string::npos)
      << glsl;
  EXPECT_NE(glsl.find("int gv = (hgid - pc.p[2]) >> 2;"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("int total = pc.p[5];"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("imageLoad("), std::string::npos) << glsl;
}

TEST(HorizontalFusion, TheHostEvaluatorRunsEachSegmentOverItsOwnElements) {
  Graph g = parse_checked(kUpdates);
  LoweredProgram program = lowered(g, Device::cpu());
  fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Cpp}, {});
  ASSERT_EQ(program.kernels.size(), 1u);
  const ProgramStep& step = program.kernels[0].steps[0];
  std::vector<Tensor> inputs = update_inputs(Device::ref());
  std::vector<Tensor> want = interpret(g, inputs);
  std::vector<std::vector<float>> host;  // one per slot, in slot order
  std::vector<HostTensor> buffers;
  host.reserve(step.args.size());
  for (int value : step.args) {
    const ProgramValue& v = program.values[size_t(value)];
    std::vector<int64_t> dims;
    for (const SymInt& d : v.type.shape) dims.push_back(d.value());
    host.push_back(v.storage == ValueStorage::Input ? inputs[size_t(v.index)].to_vector<float>()
                                                    : std::vector<float>(size_t(numel(dims)), -1.0f));
    buffers.push_back({DType::F32, dims, host.back().data()});
  }
  kernel::evaluate_kernel(step.kernel, buffers);
  for (size_t slot = 0; slot < step.args.size(); ++slot) {
    const ProgramValue& v = program.values[size_t(step.args[slot])];
    if (v.storage != ValueStorage::Output) continue;
    SCOPED_TRACE(v.name);
    expect_close(host[slot], want[size_t(v.index)].to_vector<float>());
  }
}

TEST(HorizontalFusion, ProgramsMatchTheReferenceOnEachDevice) {
  Graph g = parse_checked(kUpdates);
  std::vector<Tensor> inputs = update_inputs(Device::ref());
  std::vector<Tensor> want = interpret(g, inputs);
  std::vector<Device> devices{Device::cpu()};
  if (auto vk = testing::vulkan_device()) devices.push_back(*vk);
  for (Device device : devices) {
    SCOPED_TRACE(device.name());
    std::unique_ptr<DeviceProgram> program = build_program(g, device);
    EXPECT_EQ(program->stats().kernels, 1);
    std::vector<Tensor> moved;
    for (const Tensor& t : inputs) moved.push_back(t.to(device));
    std::vector<Tensor> got = run_program(*program, moved);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].to_vector<float>(), want[i].to_vector<float>());
  }
}

TEST(HorizontalFusion, ScalarsAndTheUpdatesReadingThemBecomeTwoKernels) {
  Graph g = parse_checked(kInterleaved);
  LoweredProgram program = lowered(g, Device::cpu());
  ASSERT_EQ(program.kernels.size(), 4u);
  EXPECT_EQ(fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Cpp}, {}), 2);
  EXPECT_EQ(print_horizontal(program),
            "kernel 0 horizontal: 2 segments over 2 elements, nodes %6 mul %9 mul\n"
            "kernel 1 horizontal: 2 segments over 48 elements, nodes %7 mul %8 sub %10 mul %11 sub\n");
  std::vector<Tensor> inputs{randn({4, 8}, Device::ref(), 1), randn({4, 8}, Device::ref(), 2),
                             from_vector<float>({0.5f}, {}, Device::ref()), randn({16}, Device::ref(), 3),
                             randn({16}, Device::ref(), 4), from_vector<float>({2.0f}, {}, Device::ref())};
  std::vector<Tensor> on_cpu;
  for (const Tensor& t : inputs) on_cpu.push_back(t.to(Device::cpu()));
  std::vector<Tensor> want = interpret(g, inputs), got = run_program(*build_program(g, Device::cpu()), on_cpu);
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].to_vector<float>(), want[i].to_vector<float>());
}

TEST(HorizontalFusion, AKernelReadingALaterValueStartsItsOwnLaunch) {
  Graph g = parse_checked(kDependent);
  LoweredProgram program = lowered(g, Device::cpu());
  ASSERT_EQ(program.kernels.size(), 3u);
  EXPECT_EQ(fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Cpp}, {}), 0);
  EXPECT_EQ(print_horizontal(program), "no horizontal kernels\n");
}

TEST(HorizontalFusion, BroadcastingKernelsKeepTheirLaunchAndTheRestMerge) {
  Graph g = parse_checked(kBroadcast);
  LoweredProgram program = lowered(g, Device::cpu());
  ASSERT_EQ(program.kernels.size(), 3u);
  EXPECT_EQ(fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Cpp}, {}), 1);
  ASSERT_EQ(program.kernels.size(), 2u);
  EXPECT_TRUE(program.kernels[0].steps[0].kernel.kernel.segments.empty());  // the broadcast add
  EXPECT_EQ(program.kernels[1].steps[0].kernel.kernel.segments.size(), 2u);
}

TEST(HorizontalFusion, ALargeIntermediateJoinsOnlyTheLastKernel) {
  Graph g = parse_checked(kLargeIntermediate);
  LoweredProgram program = lowered(g, Device::cpu());
  ASSERT_EQ(program.kernels.size(), 5u) << print_lowered_program(program);
  EXPECT_EQ(fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Cpp}, {}), 1);
  EXPECT_EQ(print_horizontal(program), "kernel 1 horizontal: 2 segments over 8224 elements, nodes %4 mul %5 tanh\n");
}

TEST(HorizontalFusion, TheTargetsLimitsSplitTheMembers) {
  Graph g = parse_checked(kUpdates);
  kernel::CodegenTarget target{kernel::Dialect::Glsl};
  target.max_buffers = 7;  // two updates: w1 g1 lr w2 g2 + two outputs
  LoweredProgram program = lowered(g, Device::cpu());
  EXPECT_EQ(fuse_horizontal(program, target, {}), 1);
  ASSERT_EQ(program.kernels.size(), 2u);
  EXPECT_EQ(program.kernels[0].steps[0].kernel.kernel.segments.size(), 2u);

  target = kernel::CodegenTarget{kernel::Dialect::Glsl, /*texel_reads=*/true};
  target.max_texel_buffers = 5;  // w1 g1 lr w2 g2, read as texels
  program = lowered(g, Device::cpu());
  EXPECT_EQ(fuse_horizontal(program, target, {}), 1);

  target = kernel::CodegenTarget{kernel::Dialect::Glsl};
  target.max_params = 4;  // two segments: the extent, one start, two sizes
  program = lowered(g, Device::cpu());
  EXPECT_EQ(fuse_horizontal(program, target, {}), 1);

  HorizontalFusionOptions small;
  small.max_elements = 20;  // only w2's 16 elements qualify
  program = lowered(g, Device::cpu());
  EXPECT_EQ(fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Glsl}, small), 0);
  small.enabled = false;
  small.max_elements = int64_t(1) << 20;
  EXPECT_EQ(fuse_horizontal(program, kernel::CodegenTarget{kernel::Dialect::Glsl}, small), 0);
}

}  // namespace
}  // namespace kiln
