// Fusion: which nodes become one kernel, and that fused kernels compute what the cpu reference
// computes, on the host evaluator (everywhere) and on Vulkan (when present).
#include "core/kernel/evaluate.h"
#include "core/kernel/lower_group.h"
#include "core/passes/fusion.h"
#include "core/runtime/interpreter.h"
#include "core/runtime/planned_program.h"
#include "runtime_test_util.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::parse_checked;

const char* kChain = R"(graph @main(%0: f32[4,8] "x", %1: f32[8] "b") {
  %2: f32[4,8] = add(%0, %1)
  %3: f32[4,8] = mul(%2, %0)
  %4: f32[4,8] = relu(%3)
  return %4
})";

const char* kBrokenChain = R"(graph @main(%0: f32[4,8] "x", %1: f32[8,4] "w") {
  %2: f32[4,8] = add(%0, %0)
  %3: f32[4,8] = tanh(%2)
  %4: f32[4,4] = matmul(%3, %1)
  %5: f32[4,4] = exp(%4)
  %6: f32[4,4] = neg(%5)
  return %6
})";

// A scalar constant, a value read twice inside the group and an intermediate that is also output.
const char* kDiamond = R"(graph @main(%0: f32[3,5] "x", %1: f32[5] "y") {
  %2: f32[] = constant() {value=dense<f32[]>[0.5]}
  %3: f32[3,5] = mul(%0, %2)
  %4: f32[3,5] = sigmoid(%3)
  %5: f32[3,5] = sub(%4, %1)
  %6: f32[3,5] = mul(%5, %3)
  return %6, %4
})";

const char* kReduce = R"(graph @main(%0: f32[6,10] "x", %1: f32[10] "y") {
  %2: f32[6,10] = sub(%0, %1)
  %3: f32[6,10] = mul(%2, %2)
  %4: f32[6] = sum(%3) {dims=[1], keepdim=false}
  return %4
})";

std::vector<Tensor> random_inputs(const Graph& g, Device device, int seed) {
  std::vector<Tensor> inputs;
  for (const Value* v : g.inputs()) inputs.push_back(randn(v->type.shape, device, uint64_t(seed++)));
  return inputs;
}

// Lowers every kernel group and evaluates the groups in order on the host.
std::map<const Value*, std::vector<float>> evaluate_groups(const Graph& g, const std::vector<Tensor>& inputs) {
  std::map<const Value*, std::vector<float>> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i].to_vector<float>();
  for (const FusionGroup& group : fuse_graph(g)) {
    if (group.kind == FusionKind::Constant) {
      const Literal& lit = group.nodes[0]->attrs.get_tensor("value");
      std::vector<float> v(size_t(lit.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(lit.element(int64_t(i)));
      env[group.nodes[0]->output()] = v;
      continue;
    }
    kernel::LoweredGroup lowered = kernel::lower_group(group.nodes, group.outputs);
    std::vector<kernel::HostTensorRef> ins, outs;
    for (const Value* v : lowered.inputs)
      ins.push_back({DType::F32, static_dims(v->type.shape), env.at(v).data()});
    for (const Value* v : lowered.outputs) {
      env[v].assign(size_t(numel(v->type.shape).value()), 0.f);
      outs.push_back({DType::F32, static_dims(v->type.shape), env[v].data()});
    }
    kernel::evaluate(lowered.op, ins, outs);
  }
  return env;
}

TEST(Fusion, PointwiseChainIsOneKernel) {
  Graph g = parse_checked(kChain);
  std::vector<FusionGroup> groups = fuse_graph(g);
  EXPECT_EQ(describe_groups(groups), "1 kernel: [add,mul,relu]");
  ASSERT_EQ(groups[0].outputs.size(), 1u);
  EXPECT_EQ(groups[0].outputs[0], g.outputs()[0]);
}

TEST(Fusion, MatmulBreaksAChainIntoThreeKernels) {
  Graph g = parse_checked(kBrokenChain);
  EXPECT_EQ(describe_groups(fuse_graph(g)), "3 kernels: [add,tanh] [matmul] [exp,neg]");
  FusionOptions off;
  off.fuse = false;
  EXPECT_EQ(describe_groups(fuse_graph(g, off)), "5 kernels: [add] [tanh] [matmul] [exp] [neg]");
}

TEST(Fusion, ReductionAbsorbsItsPointwiseProducers) {
  Graph g = parse_checked(kReduce);
  std::vector<FusionGroup> groups = fuse_graph(g);
  EXPECT_EQ(describe_groups(groups), "1 kernel: [sub,mul,sum]");
  EXPECT_EQ(groups[0].kind, FusionKind::Reduce);
}

TEST(Fusion, ReductionDoesNotFuseWhenAProducerIsAlsoAnOutput) {
  Graph g = parse_checked(R"(graph @main(%0: f32[6,10] "x") {
  %1: f32[6,10] = exp(%0)
  %2: f32[6] = sum(%1) {dims=[1], keepdim=false}
  return %2, %1
})");
  EXPECT_EQ(describe_groups(fuse_graph(g)), "2 kernels: [exp] [sum]");
}

TEST(Fusion, IntermediateReadOutsideTheGroupIsStored) {
  Graph g = parse_checked(kDiamond);
  std::vector<FusionGroup> groups = fuse_graph(g);
  EXPECT_EQ(describe_groups(groups), "1 kernel: [mul,sigmoid,sub,mul]");
  // %4 is a graph output, %6 the result: both stored; %3 and %5 stay in registers.
  const FusionGroup& k = groups[1];
  ASSERT_EQ(k.outputs.size(), 2u);
  EXPECT_EQ(k.outputs[0], g.outputs()[1]);
  EXPECT_EQ(k.outputs[1], g.outputs()[0]);
}

TEST(Fusion, FusedKernelsMatchTheCpuReferenceOnTheHostEvaluator) {
  for (const char* text : {kChain, kBrokenChain, kDiamond, kReduce}) {
    Graph g = parse_checked(text);
    std::vector<Tensor> inputs = random_inputs(g, Device::cpu(), 7);
    std::vector<Tensor> want = interpret(g, inputs);
    auto env = evaluate_groups(g, inputs);
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(env.at(g.outputs()[i]), want[i].to_vector<float>(), 1e-5f, 1e-5f);
  }
}

TEST(Fusion, FusedKernelListsEveryNodeItComputes) {
  Graph g = parse_checked(kDiamond);
  for (const FusionGroup& group : fuse_graph(g)) {
    if (group.kind == FusionKind::Constant) continue;
    kernel::LoweredGroup lowered = kernel::lower_group(group.nodes, group.outputs);
    EXPECT_EQ(lowered.op.steps.at(0).kernel.kernel.origins(), group.origins());
  }
}

TEST(Fusion, LowerGroupRejectsANonPointwiseMember) {
  Graph g = parse_checked(kBrokenChain);
  std::vector<Node*> nodes = g.nodes();
  try {
    kernel::lower_group({nodes[1], nodes[2]}, {nodes[2]->output()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[tanh,matmul]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not pointwise"), std::string::npos) << e.what();
  }
}

TEST(Fusion, FusedKernelsMatchTheCpuReferenceOnVulkan) {
  KILN_REQUIRE_VULKAN(vk);
  for (const char* text : {kChain, kBrokenChain, kDiamond, kReduce}) {
    Graph g = parse_checked(text);
    std::vector<Tensor> inputs = random_inputs(g, Device::cpu(), 11);
    std::vector<Tensor> want = interpret(g, inputs);
    std::vector<Tensor> vk_inputs;
    for (const Tensor& t : inputs) vk_inputs.push_back(t.to(vk));
    PlannedProgram program(g, vk);
    std::vector<Tensor> got = program.run(vk_inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].sizes(), want[i].sizes());
      expect_close(got[i].to_vector<float>(), want[i].to_vector<float>(), 1e-4f, 1e-5f);
    }
  }
}

}  // namespace
}  // namespace kiln
