// Fusion: which nodes become one kernel, and that fused kernels compute what the cpu reference
// computes, on the host evaluator (everywhere) and on Vulkan (when present).
#include <set>

#include "core/frontend/run_program.h"
#include "core/kernel/evaluate.h"
#include "core/kernel/lower_group.h"
#include "core/ir/text.h"
#include "core/passes/fusion.h"
#include "core/passes/pass.h"
#include "core/frontend/interpreter.h"
#include "core/runtime/planned_program.h"
#include "core/runtime/standard_passes.h"
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

// conv + bias add + relu: the add and relu run in the conv's epilogue.
const char* kConvBiasRelu = R"(graph @main(%0: f32[2,3,8,8] "x", %1: f32[4,3,3,3] "w", %2: f32[4,1,1] "b") {
  %3: f32[2,4,8,8] = conv(%0, %1) {stride=[1,1], padding=[1,1,1,1], dilation=[1,1], groups=1, channels_last=false}
  %4: f32[2,4,8,8] = add(%3, %2)
  %5: f32[2,4,8,8] = relu(%4)
  return %5
})";

// A residual block's tail: conv, batch norm folded into a scale and shift, the skip add, relu.
const char* kConvResidual = R"(graph @main(%0: f32[2,4,6,6] "x", %1: f32[4,4,3,3] "w", %2: f32[4] "cb",
                                %3: f32[4,1,1] "scale", %4: f32[4,1,1] "shift") {
  %5: f32[2,4,6,6] = conv(%0, %1, %2) {stride=[1,1], padding=[1,1,1,1], dilation=[1,1], groups=1, channels_last=false}
  %6: f32[2,4,6,6] = mul(%5, %3)
  %7: f32[2,4,6,6] = add(%6, %4)
  %8: f32[2,4,6,6] = add(%7, %0)
  %9: f32[2,4,6,6] = relu(%8)
  return %9
})";

// matmul + bias + gelu, with the bias reshaped between the matmul and the add: the reshape reads
// nothing of the matmul, so it runs first and does not split the epilogue.
const char* kMatmulBiasGelu = R"(graph @main(%0: f32[8,32] "x", %1: f32[32,16] "w", %2: f32[16] "b") {
  %3: f32[8,16] = matmul(%0, %1)
  %4: f32[1,16] = reshape(%2) {shape=[1,16]}
  %5: f32[8,16] = add(%3, %4)
  %6: f32[8,16] = gelu(%5) {approximate="none"}
  return %6
})";

// A reduction's pointwise consumers on its output shape run in its epilogue.
const char* kMeanScale = R"(graph @main(%0: f32[6,10] "x", %1: f32[6] "y") {
  %2: f32[6,10] = exp(%0)
  %3: f32[6] = mean(%2) {dims=[1], keepdim=false}
  %4: f32[6] = div(%3, %1)
  %5: f32[] = constant() {value=dense<f32[]>[0.25]}
  %6: f32[6] = mul(%4, %5)
  return %6
})";

// A pool (no backend has a template for it) with its epilogue: the generic anchored kernel runs
// on Vulkan too.
const char* kPoolEpilogue = R"(graph @main(%0: f32[2,3,8,8] "x", %1: f32[3,1,1] "s") {
  %2: f32[2,3,4,4] = max_pool(%0) {ceil_mode=false, channels_last=false, dilation=[], kernel=[2,2], padding=[], stride=[2,2]}
  %3: f32[2,3,4,4] = mul(%2, %1)
  %4: f32[2,3,4,4] = tanh(%3)
  return %4
})";

// The ONNX layer norm decomposition and the stable softmax, as exporters write them.
const char* kDecomposedLayerNorm = R"(graph @main(%0: f32[4,6,16] "x", %1: f32[16] "w", %2: f32[16] "b") {
  %3: f32[4,6,1] = mean(%0) {dims=[-1], keepdim=true}
  %4: f32[4,6,16] = sub(%0, %3)
  %5: f32[] = constant() {value=dense<f32[]>[2.0]}
  %6: f32[4,6,16] = pow(%4, %5)
  %7: f32[4,6,1] = mean(%6) {dims=[-1], keepdim=true}
  %8: f32[] = constant() {value=dense<f32[]>[1e-05]}
  %9: f32[4,6,1] = add(%7, %8)
  %10: f32[4,6,1] = sqrt(%9)
  %11: f32[4,6,16] = div(%4, %10)
  %12: f32[4,6,16] = mul(%11, %1)
  %13: f32[4,6,16] = add(%12, %2)
  return %13
})";

const char* kDecomposedSoftmax = R"(graph @main(%0: f32[5,12] "x") {
  %1: f32[5,1] = max(%0) {dims=[1], keepdim=true}
  %2: f32[5,12] = sub(%0, %1)
  %3: f32[5,12] = exp(%2)
  %4: f32[5,1] = sum(%3) {dims=[1], keepdim=true}
  %5: f32[5,12] = div(%3, %4)
  return %5
})";

// 24 pointwise ops with a transpose (permute) and a reshape in the middle.
std::string long_chain_with_views() {
  std::string text = "graph @main(%0: f32[4,6] \"x\", %1: f32[6] \"a\", %2: f32[6,4] \"c\") {\n";
  int v = 3;
  std::string prev = "%0";
  auto emit = [&](const std::string& type, const std::string& rhs) {
    text += "  %" + std::to_string(v) + ": " + type + " = " + rhs + "\n";
    prev = "%" + std::to_string(v++);
  };
  const char* unary[] = {"tanh", "sigmoid", "neg", "abs"};
  for (int i = 0; i < 8; ++i)
    emit("f32[4,6]", i % 2 ? std::string(unary[i / 2]) + "(" + prev + ")" : "add(" + prev + ", %1)");
  emit("f32[6,4]", "permute(" + prev + ") {dims=[1,0]}");
  for (int i = 0; i < 8; ++i)
    emit("f32[6,4]", i % 2 ? std::string(unary[i / 2]) + "(" + prev + ")" : "mul(" + prev + ", %2)");
  emit("f32[24]", "reshape(" + prev + ") {shape=[24]}");
  for (int i = 0; i < 8; ++i) emit("f32[24]", i % 2 ? "sin(" + prev + ")" : "add(" + prev + ", " + prev + ")");
  return text + "  return " + prev + "\n}";
}

std::vector<Tensor> random_inputs(const Graph& g, Device device, int seed) {
  std::vector<Tensor> inputs;
  for (const Value* v : g.inputs()) inputs.push_back(randn(v->type.shape, device, uint64_t(seed++)));
  return inputs;
}

// Lowers every kernel group and evaluates the groups in order on the host.
std::map<const Value*, std::vector<float>> evaluate_groups(const Graph& g, const std::vector<Tensor>& inputs) {
  std::map<const Value*, std::vector<float>> env;
  std::map<const Value*, std::vector<int32_t>> indices;  // i32 constants (index_select's)
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i].to_vector<float>();
  for (const FusionGroup& group : fuse_graph(g)) {
    if (group.kind == FusionKind::Constant) {
      const Literal& lit = group.nodes[0]->attrs.get_tensor("value");
      const Value* out = group.nodes[0]->output();
      for (int64_t i = 0; i < lit.numel(); ++i) {
        if (out->type.dtype == DType::I32) indices[out].push_back(int32_t(lit.element(i)));
        else env[out].push_back(float(lit.element(i)));
      }
      continue;
    }
    kernel::LoweredGroup lowered = kernel::lower_group(group.nodes, group.outputs);
    std::vector<HostTensor> ins, outs;
    for (const Value* v : lowered.inputs) {
      if (v->type.dtype == DType::I32)
        ins.push_back({DType::I32, static_dims(v->type.shape), indices.at(v).data()});
      else
        ins.push_back({DType::F32, static_dims(v->type.shape), env.at(v).data()});
    }
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

// A chain reading six inputs: one kernel binds 7 buffers (six inputs, one result). A device that
// binds at most 4 per kernel gets kernels of at most 4: each joins while its inputs and the values
// it hands on fit.
TEST(Fusion, AGroupClosesBeforeItsKernelBindsMoreBuffersThanTheDeviceAllows) {
  Graph g = parse_checked(R"(graph @main(%0: f32[8] "a", %1: f32[8] "b", %2: f32[8] "c", %3: f32[8] "d", %4: f32[8] "e", %5: f32[8] "f") {
  %6: f32[8] = add(%0, %1)
  %7: f32[8] = mul(%6, %2)
  %8: f32[8] = sub(%7, %3)
  %9: f32[8] = add(%8, %4)
  %10: f32[8] = mul(%9, %5)
  return %10
})");
  EXPECT_EQ(describe_groups(fuse_graph(g)), "1 kernel: [add,mul,sub,add,mul]");
  FusionOptions four;
  four.max_group_buffers = 4;
  const std::vector<FusionGroup> groups = fuse_graph(g, four);
  EXPECT_EQ(describe_groups(groups), "3 kernels: [add,mul] [sub,add] [mul]");
  for (const FusionGroup& group : groups) {
    std::set<const Value*> bound(group.outputs.begin(), group.outputs.end());
    std::set<const Node*> members(group.nodes.begin(), group.nodes.end());
    for (const Node* n : group.nodes)
      for (const Value* v : n->inputs)
        if (!members.count(v->producer)) bound.insert(v);
    EXPECT_LE(bound.size(), 4u);
  }
}

TEST(Fusion, MatmulEndsAChainAndTakesItsConsumersAsEpilogue) {
  Graph g = parse_checked(kBrokenChain);
  std::vector<FusionGroup> groups = fuse_graph(g);
  EXPECT_EQ(describe_groups(groups), "2 kernels: [add,tanh] [matmul,exp,neg]");
  EXPECT_EQ(groups[1].kind, FusionKind::Epilogue);
  FusionOptions no_epilogues;
  no_epilogues.fuse_epilogues = false;
  EXPECT_EQ(describe_groups(fuse_graph(g, no_epilogues)), "3 kernels: [add,tanh] [matmul] [exp,neg]");
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

TEST(Fusion, ConvBiasReluIsOneKernel) {
  Graph g = parse_checked(kConvBiasRelu);
  std::vector<FusionGroup> groups = fuse_graph(g);
  EXPECT_EQ(describe_groups(groups), "1 kernel: [conv,add,relu]");
  EXPECT_EQ(groups[0].kind, FusionKind::Epilogue);
  ASSERT_EQ(groups[0].outputs.size(), 1u);
  EXPECT_EQ(groups[0].outputs[0], g.outputs()[0]) << "the conv result stays in registers";
}

TEST(Fusion, ConvWithFoldedBatchNormResidualAndReluIsOneKernel) {
  Graph g = parse_checked(kConvResidual);
  EXPECT_EQ(describe_groups(fuse_graph(g)), "1 kernel: [conv,mul,add,add,relu]");
}

TEST(Fusion, MatmulBiasGeluIsOneKernelWithTheBiasReshapeRunFirst) {
  Graph g = parse_checked(kMatmulBiasGelu);
  EXPECT_EQ(describe_groups(fuse_graph(g)), "2 kernels: [reshape] [matmul,add,gelu]");
  // Without the view in between: exactly one kernel.
  Graph direct = parse_checked(R"(graph @main(%0: f32[8,32] "x", %1: f32[32,16] "w", %2: f32[16] "b") {
  %3: f32[8,16] = matmul(%0, %1)
  %4: f32[8,16] = add(%3, %2)
  %5: f32[8,16] = gelu(%4) {approximate="none"}
  return %5
})");
  EXPECT_EQ(describe_groups(fuse_graph(direct)), "1 kernel: [matmul,add,gelu]");
  // A backend with a faster template for the matmul keeps it alone; the epilogue stays one kernel.
  FusionOptions templates;
  templates.keep_alone = [](const Node& n) { return n.kind == OpKind::MatMul; };
  EXPECT_EQ(describe_groups(fuse_graph(direct, templates)), "2 kernels: [matmul] [add,gelu]");
}

TEST(Fusion, MatmulReadByANonPointwiseNodeKeepsItsOwnKernel) {
  // The matmul result is also reduced: fusing the add would store it anyway, so it stays alone.
  Graph g = parse_checked(R"(graph @main(%0: f32[4,8] "x", %1: f32[8,4] "w") {
  %2: f32[4,4] = matmul(%0, %1)
  %3: f32[4,4] = relu(%2)
  %4: f32[4] = sum(%2) {dims=[1], keepdim=false}
  return %3, %4
})");
  EXPECT_EQ(describe_groups(fuse_graph(g)), "3 kernels: [matmul] [relu] [sum]");
}

TEST(Fusion, ReductionTakesItsPointwiseConsumersAsEpilogue) {
  Graph g = parse_checked(kMeanScale);
  std::vector<FusionGroup> groups = fuse_graph(g);
  EXPECT_EQ(describe_groups(groups), "1 kernel: [exp,mean,div,mul]");
  EXPECT_EQ(groups.back().kind, FusionKind::Reduce);
  // A consumer of the input's shape (x - mean) reads the mean at other elements: not fused.
  Graph centered = parse_checked(R"(graph @main(%0: f32[6,10] "x") {
  %1: f32[6,1] = mean(%0) {dims=[1], keepdim=true}
  %2: f32[6,10] = sub(%0, %1)
  return %2
})");
  EXPECT_EQ(describe_groups(fuse_graph(centered)), "2 kernels: [mean] [sub]");
}

TEST(Fusion, DecomposedLayerNormAndSoftmaxCompileToOneKernelEach) {
  for (const char* text : {kDecomposedLayerNorm, kDecomposedSoftmax}) {
    Graph g = parse_checked(text);
    run_pipeline(g, standard_pipeline());
    std::vector<FusionGroup> groups = fuse_graph(g);
    std::string want = text == kDecomposedLayerNorm ? "1 kernel: [layer_norm]" : "1 kernel: [softmax]";
    EXPECT_EQ(describe_groups(groups), want) << print_graph(g);
  }
}

TEST(Fusion, PoolTakesItsPointwiseConsumersAsEpilogue) {
  Graph g = parse_checked(kPoolEpilogue);
  EXPECT_EQ(describe_groups(fuse_graph(g)), "1 kernel: [max_pool,mul,tanh]");
}

TEST(Fusion, ViewsInsideAPointwiseChainKeepItOneKernel) {
  Graph g = parse_checked(long_chain_with_views());
  std::vector<FusionGroup> groups = fuse_graph(g);
  ASSERT_EQ(groups.size(), 1u) << describe_groups(groups);
  EXPECT_EQ(groups[0].nodes.size(), 26u);  // 24 pointwise ops, the permute and the reshape
  FusionOptions no_views;
  no_views.fuse_views = false;
  EXPECT_EQ(describe_groups(fuse_graph(g, no_views)).substr(0, 9), "5 kernels");
}

TEST(Fusion, AValueStoredBeforeASizeChangingViewSplitsTheChain) {
  // %2 is an output, and the slice leaves fewer elements than %2 has: one kernel cannot store both.
  Graph g = parse_checked(R"(graph @main(%0: f32[4,6] "x") {
  %1: f32[4,6] = exp(%0)
  %2: f32[4,6] = neg(%1)
  %3: f32[2,6] = slice(%2) {starts=[1], ends=[3], axes=[0], steps=[1]}
  %4: f32[2,6] = relu(%3)
  return %4, %2
})");
  EXPECT_EQ(describe_groups(fuse_graph(g)), "2 kernels: [exp,neg] [slice,relu]");
  // A permute keeps the element count: the pre-permute value is stored from the same kernel.
  Graph permuted = parse_checked(R"(graph @main(%0: f32[4,6] "x") {
  %1: f32[4,6] = exp(%0)
  %2: f32[6,4] = permute(%1) {dims=[1,0]}
  %3: f32[6,4] = relu(%2)
  return %3, %1
})");
  EXPECT_EQ(describe_groups(fuse_graph(permuted)), "1 kernel: [exp,permute,relu]");
}

const char* kPadInChain = R"(graph @main(%0: f32[2,3] "x") {
  %1: f32[2,3] = exp(%0)
  %2: f32[2,5] = pad(%1) {pads=[0,1,0,1], mode="constant", value=0.5}
  %3: f32[2,5] = relu(%2)
  return %3
})";

// The views of %1 come while %3's chain is open.
const char* kViewsIntoReader = R"(graph @main(%0: f32[4,6] "x", %1: f32[6,4] "y", %2: f32[4,6] "z") {
  %3: f32[4,6] = exp(%0)
  %4: f32[2,3,4] = reshape(%1) {shape=[2,3,4]}
  %5: f32[4,2,3] = permute(%4) {dims=[2,0,1]}
  %6: f32[4,6] = reshape(%5) {shape=[4,6]}
  %7: f32[4,6] = add(%3, %2)
  %8: f32[4,6] = mul(%7, %6)
  return %8
})";

const char* kViewsIntoReduction = R"(graph @main(%0: f32[4,6] "x", %1: f32[6,4] "y") {
  %2: f32[4,6] = exp(%0)
  %3: f32[4,6] = permute(%1) {dims=[1,0]}
  %4: f32[4] = sum(%3) {dims=[1], keepdim=false}
  return %2, %4
})";

const char* kGatherAfterViews = R"(graph @main(%0: f32[1,2,3,3] "x") {
  %1: f32[1,2,5,5] = pad(%0) {pads=[0,0,1,1,0,0,1,1], mode="constant", value=0.0}
  %2: f32[1,5,5,2] = permute(%1) {dims=[0,2,3,1]}
  %3: f32[1,25,2] = reshape(%2) {shape=[1,25,2]}
  %4: i32[6] = constant() {value=dense<i32[6]>[0,6,24,6,12,7]}
  %5: f32[1,6,2] = index_select(%3, %4) {dim=1}
  %6: f32[1,2,6] = reshape(%5) {shape=[1,2,6]}
  %7: f32[1,2,6] = neg(%6)
  return %7
})";

const char* kSpreadTaps = R"(graph @main(%0: f32[2,3,3] "a", %1: f32[2,3,3] "b") {
  %2: f32[2,3,1,3,1] = reshape(%0) {shape=[2,3,1,3,1]}
  %3: f32[2,3,2,3,2] = pad(%2) {pads=[0,0,0,0,0,0,0,1,0,1], mode="constant", value=0.0}
  %4: f32[2,6,6] = reshape(%3) {shape=[2,6,6]}
  %5: f32[2,7,7] = pad(%4) {pads=[0,0,0,0,1,1], mode="constant", value=0.0}
  %6: f32[2,3,1,3,1] = reshape(%1) {shape=[2,3,1,3,1]}
  %7: f32[2,3,2,3,2] = pad(%6) {pads=[0,0,0,0,0,0,0,1,0,1], mode="constant", value=0.0}
  %8: f32[2,6,6] = reshape(%7) {shape=[2,6,6]}
  %9: f32[2,7,7] = pad(%8) {pads=[0,1,1,0,0,0], mode="constant", value=0.0}
  %10: f32[2,7,7] = add(%5, %9)
  %11: f32[2,7,7] = neg(%10)
  return %11
})";

std::vector<std::string> all_graphs() {
  std::vector<std::string> texts = {kChain, kBrokenChain, kDiamond, kReduce, kConvBiasRelu, kConvResidual,
                                    kMatmulBiasGelu, kMeanScale, kDecomposedLayerNorm, kDecomposedSoftmax,
                                    long_chain_with_views()};
  texts.push_back(kPoolEpilogue);
  for (const char* text : {kPadInChain, kViewsIntoReader, kViewsIntoReduction, kGatherAfterViews, kSpreadTaps})
    texts.push_back(text);
  // The layer norm with rsqrt and with reciprocal, raised as well.
  texts.push_back(R"(graph @main(%0: f32[3,2,8] "x", %1: f32[2,8] "w") {
  %2: f32[3,1,1] = mean(%0) {dims=[1,2], keepdim=true}
  %3: f32[3,2,8] = sub(%0, %2)
  %4: f32[3,2,8] = mul(%3, %3)
  %5: f32[3,1,1] = mean(%4) {dims=[1,2], keepdim=true}
  %6: f32[] = constant() {value=dense<f32[]>[1e-05]}
  %7: f32[3,1,1] = add(%5, %6)
  %8: f32[3,1,1] = rsqrt(%7)
  %9: f32[3,2,8] = mul(%3, %8)
  %10: f32[3,2,8] = mul(%9, %1)
  return %10
})");
  texts.push_back(R"(graph @main(%0: f32[5,8] "x", %1: f32[8] "b") {
  %2: f32[5,1] = mean(%0) {dims=[1], keepdim=true}
  %3: f32[5,8] = sub(%0, %2)
  %4: f32[] = constant() {value=dense<f32[]>[2.0]}
  %5: f32[5,8] = pow(%3, %4)
  %6: f32[5,1] = mean(%5) {dims=[1], keepdim=true}
  %7: f32[] = constant() {value=dense<f32[]>[1e-05]}
  %8: f32[5,1] = add(%6, %7)
  %9: f32[5,1] = sqrt(%8)
  %10: f32[5,1] = reciprocal(%9)
  %11: f32[5,8] = mul(%3, %10)
  %12: f32[5,8] = add(%11, %1)
  return %12
})");
  texts.push_back(R"(graph @main(%0: f32[4,6] "x") {
  %1: f32[4,6] = exp(%0)
  %2: f32[6,4] = permute(%1) {dims=[1,0]}
  %3: f32[6,4] = relu(%2)
  %4: f32[6,1] = sum(%3) {dims=[1], keepdim=true}
  %5: f32[6,1] = sqrt(%4)
  return %5
})");
  texts.push_back(R"(graph @main(%0: f32[4,6] "x", %1: f32[6] "b") {
  %2: f32[4,6] = add(%0, %1)
  %3: f32[6,4] = permute(%2) {dims=[1,0]}
  %4: f32[6,4] = relu(%3)
  %5: f32[3,4] = slice(%4) {starts=[1], ends=[6], axes=[0], steps=[2]}
  %6: f32[2,3,4] = expand(%5) {shape=[2,3,4]}
  %7: f32[2,3,4] = mul(%6, %6)
  return %7, %2
})");
  return texts;
}

TEST(Fusion, ViewsMoveIntoTheOneKernelThatReadsThem) {
  EXPECT_EQ(describe_groups(fuse_graph(parse_checked(kPadInChain))), "1 kernel: [exp,pad,relu]");
  EXPECT_EQ(describe_groups(fuse_graph(parse_checked(kViewsIntoReader))),
            "1 kernel: [reshape,permute,reshape,exp,add,mul]");
  EXPECT_EQ(describe_groups(fuse_graph(parse_checked(kViewsIntoReduction))), "2 kernels: [exp] [permute,sum]");
  // The gather reads a copy of its views, and takes the view after it.
  EXPECT_EQ(describe_groups(fuse_graph(parse_checked(kGatherAfterViews))),
            "2 kernels: [pad,permute,reshape] [index_select,reshape,neg]");
  // A max pool's gradient: each tap's share spread by the stride and padded back, summed.
  EXPECT_EQ(describe_groups(fuse_graph(parse_checked(kSpreadTaps))),
            "1 kernel: [reshape,pad,reshape,pad,reshape,pad,reshape,pad,add,neg]");
}

// The compiled form of a test graph: after the standard passes, so the decomposed patterns fused.
Graph compiled_graph(const std::string& text) {
  Graph g = parse_checked(text);
  run_pipeline(g, standard_pipeline());
  return g;
}

// The rsqrt and reciprocal forms become one layer_norm each (a bias without a weight stays an add).
TEST(Fusion, RaisedLayerNormVariantsLeaveNoStatisticsNodes) {
  std::vector<std::string> texts = all_graphs();
  for (size_t i = texts.size() - 4; i < texts.size() - 2; ++i) {
    std::string text = print_graph(compiled_graph(texts[i]));
    EXPECT_NE(text.find("layer_norm("), std::string::npos) << text;
    EXPECT_EQ(text.find("mean("), std::string::npos) << text;
  }
}

TEST(Fusion, EveryFusedKernelListsEveryNodeOfItsGroup) {
  for (const std::string& text : all_graphs()) {
    Graph g = compiled_graph(text);
    for (const FusionGroup& group : fuse_graph(g)) {
      if (group.kind == FusionKind::Constant) continue;
      kernel::LoweredGroup lowered = kernel::lower_group(group.nodes, group.outputs);
      std::set<int> origins;
      for (const auto& step : lowered.op.steps)
        for (int id : step.kernel.kernel.origins()) origins.insert(id);
      EXPECT_EQ(std::vector<int>(origins.begin(), origins.end()), group.origins()) << describe_groups({group});
    }
  }
}

TEST(Fusion, FusedKernelsMatchTheCpuReferenceOnTheHostEvaluator) {
  for (const std::string& text : all_graphs()) {
    Graph original = parse_checked(text);
    Graph g = compiled_graph(text);
    SCOPED_TRACE(describe_groups(fuse_graph(g)));
    std::vector<Tensor> inputs = random_inputs(g, Device::cpu(), 7);
    std::vector<Tensor> want = interpret(original, inputs);
    auto env = evaluate_groups(g, inputs);
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(env.at(g.outputs()[i]), want[i].to_vector<float>(), 1e-4f, 1e-5f);
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
  for (const std::string& text : all_graphs()) {
    Graph original = parse_checked(text);
    Graph g = compiled_graph(text);
    SCOPED_TRACE(describe_groups(fuse_graph(g)));
    std::vector<Tensor> inputs = random_inputs(g, Device::cpu(), 11);
    std::vector<Tensor> want = interpret(original, inputs);
    std::vector<Tensor> vk_inputs;
    for (const Tensor& t : inputs) vk_inputs.push_back(t.to(vk));
    PlannedProgram program(g, vk);
    std::vector<Tensor> got = run_program(program, vk_inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].sizes(), want[i].sizes());
      expect_close(got[i].to_vector<float>(), want[i].to_vector<float>(), 1e-4f, 1e-5f);
    }
  }
}

}  // namespace
}  // namespace kiln
