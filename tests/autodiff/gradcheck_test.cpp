// gradcheck: every gradient rule against central differences, in f64 on the cpu reference.
// Each case is a graph whose output y is wrapped as L = sum(y * W) with a random W (so every
// element of y matters); the joint graph from add_gradients gives dL/dx for every input, and each
// element is compared with (L(x + h) - L(x - h)) / 2h, h = 1e-6, within 1e-7 + 1e-5 |numeric|
// (the cast case, through f32, with h = 1e-2 and 1e-4).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "core/autodiff/reverse.h"
#include "core/ir/text.h"
#include "core/frontend/interpreter.h"
#include "core/passes/passes.h"

namespace kiln {
namespace {

struct GradCase {
  std::string name;
  std::string graph;  // f64 inputs, one output
  double low = -2, high = 2;  // where inputs are drawn (log, sqrt, pow need positive ones)
  double h = 1e-6, rtol = 1e-5;  // a case through f32 needs a wider step (the function is linear)
};

std::vector<double> values_of(const Tensor& t) { return t.to_vector<double>(); }

// L = sum(y * W) appended to a copy of the case's graph; returns the graph and the W input.
Graph with_weighted_loss(const std::string& text, Value** weight) {
  Graph g = parse_graph(text);
  Value* y = g.outputs().at(0);
  *weight = g.add_input(y->type, "W");
  Value* prod = g.add_node(OpKind::Mul, {y, *weight})->output();
  Value* loss = g.add_node(OpKind::Sum, {prod}, {{"dims", std::vector<int64_t>{}}, {"keepdim", false}})->output();
  g.set_outputs({loss});
  return g;
}

std::vector<Tensor> random_inputs(const Graph& g, const GradCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const bool is_weight = i + 1 == g.inputs().size();
    std::uniform_real_distribution<double> dist(is_weight ? -1.0 : c.low, is_weight ? 1.0 : c.high);
    std::vector<double> v(size_t(numel(static_dims(g.inputs()[i]->type.shape))));
    for (double& x : v) x = dist(rng);
    inputs.push_back(from_vector(v, Dims(static_dims(g.inputs()[i]->type.shape))));
  }
  return inputs;
}

void gradcheck(const GradCase& c) {
  SCOPED_TRACE(c.name);
  Value* weight = nullptr;
  Graph forward = with_weighted_loss(c.graph, &weight);
  Graph joint = with_weighted_loss(c.graph, &weight);
  GradientRequest request;
  request.outputs = {joint.outputs()[0]};
  for (size_t i = 0; i + 1 < joint.inputs().size(); ++i) request.wrt.push_back(joint.inputs()[i]);
  for (Value* grad : add_gradients(joint, request)) joint.add_output(grad);

  std::vector<Tensor> inputs = random_inputs(forward, c, 17);
  std::vector<Tensor> results = interpret(joint, inputs);
  // The expansions of ops the rules wrote (a conv's gradients as convs and matmuls, what Vulkan
  // and CUDA run) give the same values as the ops themselves.
  Graph expanded = joint.clone();
  if (expand_ops_pass([](const Node&) { return false; }).run(expanded).counters["ops_expanded"] > 0) {
    std::vector<Tensor> again = interpret(expanded, inputs);
    for (size_t i = 0; i < results.size(); ++i) {
      const std::vector<double> want = values_of(results[i]), got = values_of(again[i]);
      ASSERT_EQ(got.size(), want.size()) << "expanded output " << i;
      for (size_t j = 0; j < want.size(); ++j)
        EXPECT_NEAR(got[j], want[j], 1e-10 + 1e-9 * std::abs(want[j])) << "expanded output " << i << " element " << j;
    }
  }
  const double h = c.h;
  for (size_t i = 0; i + 1 < inputs.size(); ++i) {
    std::vector<double> x = values_of(inputs[i]);
    std::vector<double> analytic = values_of(results[i + 1]);
    ASSERT_EQ(analytic.size(), x.size()) << "input " << i;
    for (size_t j = 0; j < x.size(); ++j) {
      auto loss_at = [&](double delta) {
        std::vector<double> moved = x;
        moved[j] += delta;
        std::vector<Tensor> args = inputs;
        args[i] = from_vector(moved, Dims(inputs[i].sizes()));
        return values_of(interpret(forward, args)[0])[0];
      };
      const double numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
      EXPECT_NEAR(analytic[j], numeric, 1e-7 + c.rtol * std::abs(numeric))
          << "d L / d input " << i << " element " << j;
    }
  }
}

#define GRAPH(inputs, body, out) "graph @g(" inputs ") {\n" body "\n  return " out "\n}"

const std::vector<GradCase> kUnary = [] {
  std::vector<GradCase> cases;
  for (const char* op : {"neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "erf", "silu"})
    cases.push_back({op, std::string("graph @g(%0: f64[3,5]) {\n  %1: f64[3,5] = ") + op + "(%0)\n  return %1\n}"});
  for (const char* op : {"log", "sqrt", "rsqrt", "reciprocal"})
    cases.push_back({op, std::string("graph @g(%0: f64[2,7]) {\n  %1: f64[2,7] = ") + op + "(%0)\n  return %1\n}", 0.5, 3});
  cases.push_back({"leaky_relu", GRAPH("%0: f64[9]", "  %1: f64[9] = leaky_relu(%0) {alpha=0.2}", "%1")});
  cases.push_back({"elu", GRAPH("%0: f64[9]", "  %1: f64[9] = elu(%0) {alpha=0.7}", "%1")});
  cases.push_back({"gelu", GRAPH("%0: f64[9]", "  %1: f64[9] = gelu(%0)", "%1")});
  cases.push_back({"gelu_tanh", GRAPH("%0: f64[9]", "  %1: f64[9] = gelu(%0) {approximate=\"tanh\"}", "%1")});
  cases.push_back({"clip", GRAPH("%0: f64[11]", "  %1: f64[11] = clip(%0) {min=-0.5, max=1.0}", "%1")});
  cases.push_back({"cast", GRAPH("%0: f64[4]", "  %1: f32[4] = cast(%0) {dtype=f32}\n  %2: f64[4] = cast(%1) {dtype=f64}", "%2"),
                   -2, 2, 1e-2, 1e-4});
  return cases;
}();

const std::vector<GradCase> kBinary = [] {
  std::vector<GradCase> cases;
  // Same shapes, a broadcast row, a broadcast column and a scalar: {name, a, b, result}.
  const char* shapes[][4] = {{"same", "3,4", "3,4", "3,4"},
                             {"row", "3,4", "4", "3,4"},
                             {"column", "2,1,3", "4,1", "2,4,3"},
                             {"scalar", "5", "", "5"}};
  for (std::string op : {"add", "sub", "mul", "div", "maximum", "minimum"})
    for (const auto& [name, a, b, out] : shapes)
      cases.push_back({op + "_" + name,
                       std::string("graph @g(%0: f64[") + a + "], %1: f64[" + b + "]) {\n  %2: f64[" + out +
                           "] = " + op + "(%0, %1)\n  return %2\n}",
                       op == "div" ? 0.5 : -2, 2});  // div: divisors away from 0
  cases.push_back({"pow", GRAPH("%0: f64[2,3], %1: f64[3]", "  %2: f64[2,3] = pow(%0, %1)", "%2"), 0.5, 2});
  cases.push_back({"where", GRAPH("%0: f64[6], %1: f64[6], %2: f64[1]",
                                  "  %3: bool[6] = gt(%0, %1)\n  %4: f64[6] = where(%3, %0, %2)", "%4")});
  return cases;
}();

const std::vector<GradCase> kReduce = {
    {"sum_rows", GRAPH("%0: f64[3,5]", "  %1: f64[3] = sum(%0) {dims=[1], keepdim=false}", "%1")},
    {"sum_all_keep", GRAPH("%0: f64[2,3,2]", "  %1: f64[1,1,1] = sum(%0) {dims=[], keepdim=true}", "%1")},
    {"mean_negative_dim", GRAPH("%0: f64[4,3]", "  %1: f64[4] = mean(%0) {dims=[-1], keepdim=false}", "%1")},
    {"max", GRAPH("%0: f64[3,5]", "  %1: f64[5] = max(%0) {dims=[0], keepdim=false}", "%1")},
    {"min_keep", GRAPH("%0: f64[3,5]", "  %1: f64[3,1] = min(%0) {dims=[1], keepdim=true}", "%1")},
    {"prod", GRAPH("%0: f64[2,4]", "  %1: f64[2] = prod(%0) {dims=[1], keepdim=false}", "%1"), 0.5, 1.5},
    {"logsumexp", GRAPH("%0: f64[3,4]", "  %1: f64[3] = logsumexp(%0) {dims=[1], keepdim=false}", "%1")},
    {"softmax", GRAPH("%0: f64[3,4]", "  %1: f64[3,4] = softmax(%0) {dim=1}", "%1")},
    {"softmax_dim0", GRAPH("%0: f64[3,4]", "  %1: f64[3,4] = softmax(%0) {dim=0}", "%1")},
    {"log_softmax", GRAPH("%0: f64[2,5]", "  %1: f64[2,5] = log_softmax(%0) {dim=-1}", "%1")},
};

const std::vector<GradCase> kLinalgAndShape = {
    {"matmul", GRAPH("%0: f64[3,4], %1: f64[4,5]", "  %2: f64[3,5] = matmul(%0, %1)", "%2")},
    {"matmul_batch_broadcast", GRAPH("%0: f64[2,3,4], %1: f64[4,2]", "  %2: f64[2,3,2] = matmul(%0, %1)", "%2")},
    {"matmul_vector", GRAPH("%0: f64[4], %1: f64[2,4,3]", "  %2: f64[2,3] = matmul(%0, %1)", "%2")},
    {"linear", GRAPH("%0: f64[2,3,4], %1: f64[5,4], %2: f64[5]", "  %3: f64[2,3,5] = linear(%0, %1, %2)", "%3")},
    {"gemm_transposed", GRAPH("%0: f64[4,3], %1: f64[5,4], %2: f64[5]",
                              "  %3: f64[3,5] = gemm(%0, %1, %2) {alpha=0.5, beta=2.0, trans_a=true, trans_b=true}", "%3")},
    {"reshape", GRAPH("%0: f64[2,6]", "  %1: f64[3,4] = reshape(%0) {shape=[3,4]}\n  %2: f64[3,4] = sin(%1)", "%2")},
    {"permute", GRAPH("%0: f64[2,3,4]", "  %1: f64[4,2,3] = permute(%0) {dims=[2,0,1]}", "%1")},
    {"expand", GRAPH("%0: f64[3,1]", "  %1: f64[2,3,4] = expand(%0) {shape=[2,3,4]}", "%1")},
    {"concat", GRAPH("%0: f64[2,3], %1: f64[2,1]", "  %2: f64[2,4] = concat(%0, %1) {dim=1}", "%2")},
    {"split", GRAPH("%0: f64[5,2]", "  %1, %2: f64[2,2], f64[3,2] = split(%0) {dim=0, sizes=[2,3]}\n  %3: f64[3,2] = exp(%2)", "%3")},
    // A value read twice: its gradients add up.
    {"reuse", GRAPH("%0: f64[4]", "  %1: f64[4] = mul(%0, %0)\n  %2: f64[4] = tanh(%0)\n  %3: f64[4] = add(%1, %2)", "%3")},
};

const std::vector<GradCase> kConvAndPool = {
    {"conv", GRAPH("%0: f64[2,3,5,5], %1: f64[4,3,3,3], %2: f64[4]",
                   "  %3: f64[2,4,5,5] = conv(%0, %1, %2) {padding=[1,1,1,1]}", "%3")},
    {"conv_strided_dilated_asymmetric", GRAPH("%0: f64[1,2,7,6], %1: f64[3,2,2,3]",
                                              "  %2: f64[1,3,3,6] = conv(%0, %1) {stride=[2,1], padding=[1,0,0,2], dilation=[2,1]}", "%2")},
    {"conv_groups", GRAPH("%0: f64[2,4,5,5], %1: f64[6,2,3,3]",
                          "  %2: f64[2,6,3,3] = conv(%0, %1) {stride=[2,2], padding=[1,1,1,1], groups=2}", "%2")},
    {"conv_depthwise", GRAPH("%0: f64[1,3,4,4], %1: f64[3,1,2,2]", "  %2: f64[1,3,3,3] = conv(%0, %1) {groups=3}", "%2")},
    {"conv1d", GRAPH("%0: f64[2,3,9], %1: f64[2,3,4], %2: f64[2]",
                     "  %3: f64[2,2,3] = conv(%0, %1, %2) {stride=[3], padding=[1,2]}", "%3")},
    // Big enough that the weight's gradient splits the batch into parts (2 here, 3 below), and at
    // stride 1 the input's gradient is a conv with the weight mirrored.
    {"conv_batch_split", GRAPH("%0: f64[8,2,8,8], %1: f64[3,2,3,3]",
                               "  %2: f64[8,3,8,8] = conv(%0, %1) {padding=[1,1,1,1]}", "%2")},
    {"conv_batch_split_groups_dilated_asymmetric",
     GRAPH("%0: f64[12,4,8,8], %1: f64[4,2,3,3]",
           "  %2: f64[12,4,8,8] = conv(%0, %1) {padding=[2,1,2,3], dilation=[2,2], groups=2}", "%2")},
    // A strided 1x1 conv (ResNet's downsampling): the spread gradient's last zeros are cropped. A
    // padding past the kernel keeps the conv_transpose form.
    {"conv_1x1_strided", GRAPH("%0: f64[2,3,5,5], %1: f64[4,3,1,1]",
                               "  %2: f64[2,4,3,3] = conv(%0, %1) {stride=[2,2]}", "%2")},
    {"conv_padded_past_kernel", GRAPH("%0: f64[1,2,3,3], %1: f64[3,2,1,1]",
                                      "  %2: f64[1,3,5,5] = conv(%0, %1) {padding=[1,1,1,1]}", "%2")},
    {"conv_transpose", GRAPH("%0: f64[2,3,3,3], %1: f64[3,2,3,3], %2: f64[2]",
                             "  %3: f64[2,2,6,6] = conv_transpose(%0, %1, %2) {stride=[2,2], padding=[1,1,1,1], output_padding=[1,1]}", "%3")},
    {"conv_transpose_groups_dilated", GRAPH("%0: f64[1,4,3,4], %1: f64[4,1,2,2]",
                                            "  %2: f64[1,2,4,7] = conv_transpose(%0, %1) {stride=[1,2], padding=[0,1,1,0], dilation=[2,1], groups=2}", "%2")},
    {"conv_transpose1d_output_padding_past_stride", GRAPH("%0: f64[1,2,4], %1: f64[2,3,3]",
                                                          "  %2: f64[1,3,9] = conv_transpose(%0, %1) {dilation=[2], output_padding=[1]}", "%2")},
    // conv's weight gradient, differentiated again; g may stop short of the conv's output (here
    // two input rows and one column past the last window).
    {"conv_weight_grad", GRAPH("%0: f64[2,3,5,5], %1: f64[2,4,3,3]",
                               "  %2: f64[4,3,3,3] = conv_weight_grad(%0, %1) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1]}", "%2")},
    {"conv_weight_grad_groups_short", GRAPH("%0: f64[1,4,6,5], %1: f64[1,2,2,2]",
                                            "  %2: f64[2,2,2,2] = conv_weight_grad(%0, %1) {kernel=[2,2], stride=[2,2], groups=2}", "%2")},
    {"max_pool", GRAPH("%0: f64[2,3,4,4]", "  %1: f64[2,3,2,2] = max_pool(%0) {kernel=[2,2], stride=[2,2]}", "%1")},
    {"max_pool_overlapping_padded", GRAPH("%0: f64[1,2,5,5]", "  %1: f64[1,2,3,3] = max_pool(%0) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1]}", "%1")},
    {"max_pool_dilated_ceil", GRAPH("%0: f64[1,1,7,7]", "  %1: f64[1,1,3,3] = max_pool(%0) {kernel=[2,2], stride=[2,2], dilation=[2,2], ceil_mode=true}", "%1")},
    {"max_pool1d", GRAPH("%0: f64[2,2,9]", "  %1: f64[2,2,4] = max_pool(%0) {kernel=[3], stride=[2]}", "%1")},
    {"avg_pool", GRAPH("%0: f64[2,3,4,4]", "  %1: f64[2,3,2,2] = avg_pool(%0) {kernel=[2,2], stride=[2,2]}", "%1")},
    {"avg_pool_padded", GRAPH("%0: f64[1,2,5,5]", "  %1: f64[1,2,3,3] = avg_pool(%0) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1]}", "%1")},
    {"avg_pool_padded_counted", GRAPH("%0: f64[1,2,5,5]", "  %1: f64[1,2,3,3] = avg_pool(%0) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1], count_include_pad=true}", "%1")},
    {"avg_pool_ceil", GRAPH("%0: f64[1,1,6,6]", "  %1: f64[1,1,4,4] = avg_pool(%0) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1], ceil_mode=true, count_include_pad=true}", "%1")},
    {"avg_pool1d", GRAPH("%0: f64[1,2,7]", "  %1: f64[1,2,3] = avg_pool(%0) {kernel=[3], stride=[2]}", "%1")},
    {"global_avg_pool", GRAPH("%0: f64[2,3,3,4]", "  %1: f64[2,3,1,1] = global_avg_pool(%0)", "%1")},
};

const std::vector<GradCase> kNorm = {
    {"layer_norm", GRAPH("%0: f64[2,3,4], %1: f64[4], %2: f64[4]", "  %3: f64[2,3,4] = layer_norm(%0, %1, %2) {axis=-1}", "%3")},
    {"layer_norm_two_dims", GRAPH("%0: f64[2,3,4], %1: f64[3,4]", "  %2: f64[2,3,4] = layer_norm(%0, %1) {axis=1, eps=0.01}", "%2")},
    {"layer_norm_plain", GRAPH("%0: f64[3,5]", "  %1: f64[3,5] = layer_norm(%0) {axis=1}", "%1")},
    {"group_norm", GRAPH("%0: f64[2,4,3,3], %1: f64[4], %2: f64[4]", "  %3: f64[2,4,3,3] = group_norm(%0, %1, %2) {num_groups=2}", "%3")},
    // Inference: every input's gradient, the running statistics' included (variances drawn > 0).
    {"batch_norm", GRAPH("%0: f64[2,3,2,2], %1: f64[3], %2: f64[3], %3: f64[3], %4: f64[3]",
                         "  %5: f64[2,3,2,2] = batch_norm(%0, %1, %2, %3, %4) {eps=0.001}", "%5"), 0.5, 2},
    // Training: the batch's own statistics, differentiated through.
    {"batch_norm_batch_statistics",
     GRAPH("%0: f64[3,2,2,2], %1: f64[2], %2: f64[2]",
           "  %3: f64[1,2,1,1] = mean(%0) {dims=[0,2,3], keepdim=true}\n"
           "  %4: f64[3,2,2,2] = sub(%0, %3)\n  %5: f64[3,2,2,2] = mul(%4, %4)\n"
           "  %6: f64[2] = mean(%5) {dims=[0,2,3], keepdim=false}\n  %7: f64[2] = reshape(%3) {shape=[2]}\n"
           "  %8: f64[3,2,2,2] = batch_norm(%0, %7, %6, %1, %2)", "%8")},
};

const std::vector<GradCase> kDataMovement = {
    {"slice_negative_step", GRAPH("%0: f64[5,6]", "  %1: f64[3,3] = slice(%0) {axes=[0,1], starts=[1,-1], ends=[4,0], steps=[1,-2]}", "%1")},
    {"slice_strided", GRAPH("%0: f64[7,2]", "  %1: f64[3,2] = slice(%0) {starts=[0], ends=[7], steps=[3]}", "%1")},
    {"slice_to_the_end", GRAPH("%0: f64[2,5]", "  %1: f64[2,2] = slice(%0) {axes=[-1], starts=[3], ends=[9223372036854775807]}", "%1")},
    {"gather", GRAPH("%0: f64[3,4]",
                     "  %1: i64[2,4] = constant() {value=dense<i64[2,4]>[0,2,2,-1,1,1,0,2]}\n"
                     "  %2: f64[2,4] = gather(%0, %1) {dim=0}", "%2")},
    {"gather_shorter_index", GRAPH("%0: f64[3,5]",
                                   "  %1: i64[2,2] = constant() {value=dense<i64[2,2]>[4,4,0,3]}\n"
                                   "  %2: f64[2,2] = gather(%0, %1) {dim=1}", "%2")},
    {"index_select_embedding", GRAPH("%0: f64[5,3]",
                                     "  %1: i64[2,3] = constant() {value=dense<i64[2,3]>[1,4,1,0,-1,2]}\n"
                                     "  %2: f64[2,3,3] = index_select(%0, %1) {dim=0}", "%2")},
    {"index_select_middle", GRAPH("%0: f64[2,4,3]",
                                  "  %1: i32[3] = constant() {value=dense<i32[3]>[3,0,3]}\n"
                                  "  %2: f64[2,3,3] = index_select(%0, %1) {dim=1}", "%2")},
    {"pad", GRAPH("%0: f64[3,4]", "  %1: f64[4,5] = pad(%0) {pads=[1,-1,0,2], value=2.0}", "%1")},
    {"pad_reflect", GRAPH("%0: f64[2,5]", "  %1: f64[3,9] = pad(%0) {pads=[1,3,0,1], mode=\"reflect\"}", "%1")},
    {"pad_edge", GRAPH("%0: f64[3,2]", "  %1: f64[6,5] = pad(%0) {pads=[2,1,1,2], mode=\"edge\"}", "%1")},
    {"tile", GRAPH("%0: f64[2,3]", "  %1: f64[4,9] = tile(%0) {repeats=[2,3]}", "%1")},
    // Negative dividends: remainder floors the quotient, fmod truncates it.
    {"mod", GRAPH("%0: f64[6], %1: f64[6]", "  %2: f64[6] = neg(%0)\n  %3: f64[6] = mod(%2, %1)", "%3"), 0.3, 3},
    {"fmod", GRAPH("%0: f64[6], %1: f64[1]", "  %2: f64[6] = neg(%0)\n  %3: f64[6] = mod(%2, %1) {fmod=true}", "%3"), 0.3, 3},
};

TEST(GradCheck, UnaryRulesMatchCentralDifferences) {
  for (const GradCase& c : kUnary) gradcheck(c);
}
TEST(GradCheck, BinaryRulesWithBroadcastingMatchCentralDifferences) {
  for (const GradCase& c : kBinary) gradcheck(c);
}
TEST(GradCheck, ReductionAndRowRulesMatchCentralDifferences) {
  for (const GradCase& c : kReduce) gradcheck(c);
}
TEST(GradCheck, LinalgAndShapeRulesMatchCentralDifferences) {
  for (const GradCase& c : kLinalgAndShape) gradcheck(c);
}
TEST(GradCheck, ConvAndPoolingRulesMatchCentralDifferences) {
  for (const GradCase& c : kConvAndPool) gradcheck(c);
}
TEST(GradCheck, NormRulesMatchCentralDifferences) {
  for (const GradCase& c : kNorm) gradcheck(c);
}
TEST(GradCheck, DataMovementRulesMatchCentralDifferences) {
  for (const GradCase& c : kDataMovement) gradcheck(c);
}

// Ties split evenly, as torch: max over [1, 3, 3] sends half the gradient to each 3.
TEST(GradCheck, MaxSplitsTiesEvenly) {
  Graph g = parse_graph(GRAPH("%0: f64[3]", "  %1: f64[] = max(%0) {dims=[], keepdim=false}", "%1"));
  GradientRequest request{{g.outputs()[0]}, {}, {g.inputs()[0]}};
  g.add_output(add_gradients(g, request)[0]);
  std::vector<Tensor> out = interpret(g, {from_vector(std::vector<double>{1, 3, 3})});
  EXPECT_EQ(values_of(out[1]), (std::vector<double>{0, 0.5, 0.5}));
}

// A stride-1 conv's gradients, expanded, take the conv templates' shape: the input's is a conv (no
// conv_transpose), and the weight's splits the batch of 16 into 4 parts of 4 images (2 groups x
// 4 parts = 8 groups), summed after.
TEST(GradCheck, StrideOneConvGradientsExpandToConvsAndTheWeightsSplitsTheBatch) {
  Graph g = parse_graph(GRAPH("%0: f32[16,4,16,16], %1: f32[6,2,3,3]",
                              "  %2: f32[16,6,16,16] = conv(%0, %1) {padding=[1,1,1,1], groups=2}\n"
                              "  %3: f32[] = sum(%2) {dims=[], keepdim=false}", "%3"));
  GradientRequest request{{g.outputs()[0]}, {}, {g.inputs()[0], g.inputs()[1]}};
  for (Value* grad : add_gradients(g, request)) g.add_output(grad);
  expand_ops_pass([](const Node&) { return false; }).run(g);
  const std::string text = print_graph(g);
  EXPECT_EQ(text.find("conv_transpose"), std::string::npos) << text;
  EXPECT_NE(text.find("groups=8"), std::string::npos) << text;
}

// A rule that cannot apply is an error naming the op and the line it was recorded at: here a
// slice's gradient, which places values by number, along a symbolic dim.
TEST(GradCheck, ARuleThatCannotApplyNamesTheOpAndItsLine) {
  Graph g = parse_graph(GRAPH("%0: f64[s0,4]",
                              "  %1: f64[2,4] = slice(%0) {axes=[0], starts=[1], ends=[3]} loc(\"net.cpp\":12)\n"
                              "  %2: f64[] = sum(%1) {dims=[], keepdim=false}",
                              "%2"));
  GradientRequest request{{g.outputs()[0]}, {}, {g.inputs()[0]}};
  try {
    add_gradients(g, request);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("op 'slice'"), std::string::npos) << what;
    EXPECT_NE(what.find("net.cpp:12"), std::string::npos) << what;
    EXPECT_NE(what.find("symbolic sizes here are not supported yet"), std::string::npos) << what;
  }
}

// Differentiating a value of several elements needs its gradient: the error says so.
TEST(GradCheck, ANonScalarWithoutASeedIsAnError) {
  Graph g = parse_graph(GRAPH("%0: f64[3]", "  %1: f64[3] = exp(%0)", "%1"));
  GradientRequest request{{g.outputs()[0]}, {}, {g.inputs()[0]}};
  EXPECT_THROW(add_gradients(g, request), Error);
}

// Gradient nodes say whose gradient they are, in messages and in the text form (which parses back).
TEST(GradCheck, GradientNodesCarryTheForwardNodesLineMarkedAsItsGradient) {
  Graph g = parse_graph(GRAPH("%0: f64[4], %1: f64[4]",
                              "  %2: f64[4] = mul(%0, %1) loc(\"net.cpp\":3 scope=\"head\")\n"
                              "  %3: f64[] = sum(%2) {dims=[], keepdim=false}",
                              "%3"));
  GradientRequest request{{g.outputs()[0]}, {}, {g.inputs()[0]}};
  Value* dx = add_gradients(g, request)[0];
  EXPECT_EQ(dx->producer->provenance.str(), "gradient of mul at net.cpp:3 [head]");
  g.add_output(dx);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("grad=\"mul\""), std::string::npos) << text;
  EXPECT_EQ(print_graph(parse_graph(text)), text);
}

// Every op says how gradients pass it: each one has a rule or lets none through. A new op without
// a rule fails here (and its backward raises an error naming it). The exceptions: while_loop, whose
// backward needs every iteration's carried values, which the loop does not keep, and the Winograd
// transforms, which the winograd pass makes from convs after autodiff has run.
TEST(GradCheck, EveryOpHasAGradientRuleOrNone) {
  std::vector<std::string> missing;
  for (size_t k = 0; k < kOpCount; ++k)
    if (op_def(OpKind(k)).gradient == Gradient::Missing) missing.push_back(std::string(op_name(OpKind(k))));
  EXPECT_EQ(missing, (std::vector<std::string>{"winograd_weights", "winograd_input", "winograd_output", "while_loop"}));
  for (size_t k = 0; k < kOpCount; ++k)
    if (op_def(OpKind(k)).gradient == Gradient::Rule) EXPECT_TRUE(op_def(OpKind(k)).vjp) << op_name(OpKind(k));
}

}  // namespace
}  // namespace kiln
