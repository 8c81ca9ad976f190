// kiln::nn: PyTorch parameter names, state_dict loading and its errors, layer outputs against naive
// loops, multi-head attention against a per-head reference, and module scopes in provenance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "core/frontend/tracer.h"
#include "core/ir/graph.h"
#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::all_close;
using testing::as_doubles;
using testing::uniform_values;
using testing::values;

// Tolerance for f32 results against double-precision naive loops.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

std::vector<std::pair<std::string, std::vector<int64_t>>> names_and_shapes(nn::Module& m) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (auto& [name, t] : m.named_tensors()) out.emplace_back(name, t->sizes());
  return out;
}

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor*>>& entries) {
  std::vector<std::string> out;
  for (const auto& [name, t] : entries) out.push_back(name);
  return out;
}

// A state with random values for every tensor of `m`, keyed as its state_dict.
std::map<std::string, Tensor> random_state(nn::Module& m, uint64_t seed) {
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : m.named_tensors()) {
    if (t->dtype() != DType::F32) continue;
    state[name] = from_vector(uniform_values(size_t(t->numel()), seed++, -1, 1), t->sizes());
  }
  return state;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no kiln::Error thrown>";
}

// A small network with a named submodule chain, as users write them.
struct Net : nn::UnaryModule {
  nn::Sequential features;
  nn::Linear head{8, 2, true, Device::cpu(), 3};
  Net() {
    features.emplace<nn::Linear>(4, 8, true, Device::cpu(), 1);
    features.emplace<nn::ReLU>();
    register_module("features", features);
    register_module("head", head);
  }
  std::string type_name() const override { return "Net"; }
  Tensor forward(const Tensor& x, Loc loc = Loc::current()) override {
    ScopeGuard guard = scope();
    return head(features(x, loc), loc);
  }
};

// ---- names, shapes and initialization

TEST(NnModule, ParameterNamesAndShapesMatchPyTorch) {
  using NS = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  nn::Linear linear(4, 3);
  EXPECT_EQ(names_and_shapes(linear), (NS{{"weight", {3, 4}}, {"bias", {3}}}));
  nn::Linear no_bias(4, 3, false);
  EXPECT_EQ(names_and_shapes(no_bias), (NS{{"weight", {3, 4}}}));
  EXPECT_EQ(no_bias.bias, nullptr);

  nn::Conv2d conv(4, 6, {3, 2}, 1, 0, 1, /*groups=*/2);
  EXPECT_EQ(names_and_shapes(conv), (NS{{"weight", {6, 2, 3, 2}}, {"bias", {6}}}));

  nn::BatchNorm2d bn(5);
  EXPECT_EQ(names_and_shapes(bn), (NS{{"weight", {5}},
                                      {"bias", {5}},
                                      {"running_mean", {5}},
                                      {"running_var", {5}},
                                      {"num_batches_tracked", {}}}));
  EXPECT_EQ(names(bn.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(names(bn.named_buffers()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::I64);

  nn::LayerNorm ln({2, 3});
  EXPECT_EQ(names_and_shapes(ln), (NS{{"weight", {2, 3}}, {"bias", {2, 3}}}));
  nn::LayerNorm ln1({7});
  EXPECT_EQ(names_and_shapes(ln1), (NS{{"weight", {7}}, {"bias", {7}}}));

  nn::Embedding emb(10, 4);
  EXPECT_EQ(names_and_shapes(emb), (NS{{"weight", {10, 4}}}));

  nn::MultiheadAttention mha(8, 2);
  EXPECT_EQ(names_and_shapes(mha), (NS{{"in_proj_weight", {24, 8}},
                                       {"in_proj_bias", {24}},
                                       {"out_proj.weight", {8, 8}},
                                       {"out_proj.bias", {8}}}));
  nn::MultiheadAttention mha_no_bias(8, 2, false);
  EXPECT_EQ(names(mha_no_bias.named_parameters()),
            (std::vector<std::string>{"in_proj_weight", "out_proj.weight"}));
}

TEST(NnModule, InitializationIsSeededAndWithinPyTorchBounds) {
  nn::Linear a(16, 8, true, Device::cpu(), 7), b(16, 8, true, Device::cpu(), 7);
  nn::Linear c(16, 8, true, Device::cpu(), 8);
  EXPECT_EQ(values(a.weight), values(b.weight));
  EXPECT_EQ(values(*a.bias), values(*b.bias));
  EXPECT_NE(values(a.weight), values(c.weight));
  EXPECT_NE(values(*a.bias), values(*c.bias));
  for (double w : values(a.weight)) EXPECT_LE(std::abs(w), 0.25);  // 1/sqrt(in_features)
  for (double w : values(*a.bias)) EXPECT_LE(std::abs(w), 0.25);

  nn::Conv2d conv(2, 4, 3, 1, 0, 1, 1, true, Device::cpu(), 5);
  for (double w : values(conv.weight)) EXPECT_LE(std::abs(w), 1 / std::sqrt(18.0));

  nn::BatchNorm2d bn(3);
  EXPECT_EQ(values(bn.weight), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(values(bn.bias), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values(bn.running_mean), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values(bn.running_var), (std::vector<double>{1, 1, 1}));

  nn::MultiheadAttention mha(8, 2, true, true, Device::cpu(), 1);
  for (double w : values(mha.in_proj_weight)) EXPECT_LE(std::abs(w), std::sqrt(6.0 / 32));
  EXPECT_EQ(values(*mha.in_proj_bias), std::vector<double>(24, 0));  // PyTorch zeroes both biases
  EXPECT_EQ(values(*mha.out_proj.bias), std::vector<double>(8, 0));
}

TEST(NnModule, PathsJoinLocalNamesFromTheRoot) {
  Net net;
  EXPECT_EQ(net.path(), "");
  EXPECT_EQ(net.features.path(), "features");
  EXPECT_EQ(net.features[1].path(), "features.1");
  EXPECT_EQ(net.head.path(), "head");
  net.set_name("net");
  EXPECT_EQ(net.features[0].path(), "net.features.0");
  EXPECT_THROW(net.head.set_name("other"), Error);  // a submodule's name is its registered one
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"features.0.weight", "features.0.bias", "head.weight",
                                      "head.bias"}));
}

TEST(NnSequential, NamesChildrenByPositionOrGivenName) {
  nn::Sequential seq;
  seq.emplace<nn::Linear>(4, 8);
  seq.emplace<nn::ReLU>();
  seq.add("fc", std::make_unique<nn::Linear>(8, 2));
  seq.add(std::make_unique<nn::Flatten>());
  EXPECT_EQ(seq.size(), 4u);
  EXPECT_EQ(names(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "fc.weight", "fc.bias"}));
  EXPECT_EQ(seq[3].path(), "3");
  std::string msg = error_of([&] { seq.add("fc", std::make_unique<nn::ReLU>()); });
  EXPECT_NE(msg.find("'fc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("already taken"), std::string::npos) << msg;
  EXPECT_EQ(seq.size(), 4u);  // the rejected child was not added
  EXPECT_THROW(seq.add("a.b", std::make_unique<nn::ReLU>()), Error);
  EXPECT_THROW(seq[4], Error);
}

// ---- state_dict

TEST(NnStateDict, RoundTripCopiesEveryValue) {
  Net a, b;  // same seeds: perturb b so the copy is visible
  b.load_state_dict(random_state(b, 100));
  std::map<std::string, Tensor> state = a.state_dict();
  EXPECT_EQ(state.size(), 4u);
  ASSERT_TRUE(state.count("features.0.weight"));
  ASSERT_NE(values(*b.named_parameters()[0].second), values(state["features.0.weight"]));
  nn::LoadResult r = b.load_state_dict(state);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  for (auto& [key, t] : b.named_tensors()) EXPECT_EQ(values(*t), values(state[key])) << key;
  Tensor x = from_vector(uniform_values(8, 1), {2, 4});
  EXPECT_EQ(values(a(x)), values(b(x)));
}

TEST(NnStateDict, LoadConvertsDtypeAndKeepsTheParameterDevice) {
  nn::Linear lin(2, 1);
  std::map<std::string, Tensor> state{{"weight", from_vector<double>({0.5, -2}, {1, 2})},
                                      {"bias", from_vector<double>({3})}};
  lin.load_state_dict(state);
  EXPECT_EQ(lin.weight.dtype(), DType::F32);
  EXPECT_EQ(values(lin.weight), (std::vector<double>{0.5, -2}));

  Device null(BackendKind::Null, 0);
  nn::BatchNorm2d bn(2, 1e-5, 0.1, null);
  EXPECT_EQ(bn.running_var.device(), null);
  bn.load_state_dict(random_state(bn, 3), /*strict=*/false);
  for (auto& [key, t] : bn.named_tensors()) EXPECT_EQ(t->device(), null) << key;
  bn.to(Device::cpu());
  for (auto& [key, t] : bn.named_tensors()) EXPECT_EQ(t->device(), Device::cpu()) << key;
}

TEST(NnStateDict, StrictLoadListsMissingAndUnexpectedKeysTogether) {
  Net net;
  std::map<std::string, Tensor> state = net.state_dict();
  Tensor before = net.head.weight;
  state.erase("features.0.bias");
  state.erase("head.bias");
  state["head.scale"] = ones({2});
  state["head.weight"] = zeros({2, 8});
  std::string msg = error_of([&] { net.load_state_dict(state); });
  EXPECT_NE(msg.find("missing keys: features.0.bias, head.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected keys: head.scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Net"), std::string::npos) << msg;
  EXPECT_EQ(values(net.head.weight), values(before));  // a failed load changes nothing

  nn::LoadResult r = net.load_state_dict(state, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"features.0.bias", "head.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"head.scale"}));
  EXPECT_EQ(values(net.head.weight), std::vector<double>(16, 0));  // present keys were loaded
}

TEST(NnStateDict, ShapeMismatchNamesTheKeyAndBothShapes) {
  nn::Sequential seq;
  seq.emplace<nn::Linear>(4, 4);
  std::map<std::string, Tensor> state = seq.state_dict();
  state["0.weight"] = zeros({3, 4});
  for (bool strict : {true, false}) {
    std::string msg = error_of([&] { seq.load_state_dict(state, strict); });
    EXPECT_NE(msg.find("'0.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[3,4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[4,4]"), std::string::npos) << msg;
  }
}

// ---- layer outputs against naive loops, with loaded weights

TEST(NnLayers, LinearMatchesNaiveMatVec) {
  nn::Linear lin(5, 3);
  auto state = random_state(lin, 10);
  lin.load_state_dict(state);
  std::vector<float> w = state["weight"].to_vector<float>(), b = state["bias"].to_vector<float>();
  std::vector<float> x = uniform_values(4 * 5, 11);
  std::vector<double> expected;
  for (int n = 0; n < 4; ++n)
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int i = 0; i < 5; ++i) acc += double(w[o * 5 + i]) * x[n * 5 + i];
      expected.push_back(acc);
    }
  Tensor y = lin(from_vector(x, {4, 5}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(all_close(values(y), expected, kRtol, kAtol));
}

TEST(NnLayers, Conv2dMatchesNaiveLoopWithStridePaddingGroups) {
  const int64_t N = 2, C = 4, H = 5, W = 6, O = 6, G = 2, KH = 3, KW = 2, SH = 2, SW = 1, PH = 1,
                PW = 1;
  nn::Conv2d conv(C, O, {KH, KW}, {SH, SW}, {PH, PW}, 1, G);
  auto state = random_state(conv, 20);
  conv.load_state_dict(state);
  std::vector<float> w = state["weight"].to_vector<float>(), b = state["bias"].to_vector<float>();
  std::vector<float> x = uniform_values(size_t(N * C * H * W), 21);
  const int64_t OH = (H + 2 * PH - KH) / SH + 1, OW = (W + 2 * PW - KW) / SW + 1;
  const int64_t CG = C / G, OG = O / G;
  std::vector<double> expected;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b[size_t(o)];
          int64_t g = o / OG;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * SH - PH + kh, iw = ow * SW - PW + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(w[size_t(((o * CG + c) * KH + kh) * KW + kw)]) *
                       x[size_t(((n * C + g * CG + c) * H + ih) * W + iw)];
              }
          expected.push_back(acc);
        }
  Tensor y = conv(from_vector(x, {N, C, H, W}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{N, O, OH, OW}));
  EXPECT_TRUE(all_close(values(y), expected, kRtol, kAtol));
}

TEST(NnLayers, BatchNorm2dInEvalModeUsesRunningStatistics) {
  nn::BatchNorm2d bn(3, 1e-3);
  bn.eval();
  std::vector<float> gamma{1.5f, -1, 0.5f}, beta{0.1f, 0.2f, -0.3f}, mu{0.5f, -1, 2},
      var{0.25f, 4, 1};
  bn.load_state_dict({{"weight", from_vector(gamma)},
                      {"bias", from_vector(beta)},
                      {"running_mean", from_vector(mu)},
                      {"running_var", from_vector(var)},
                      {"num_batches_tracked", from_vector<int64_t>({7}, Dims(std::vector<int64_t>{}))}});
  std::vector<float> x = uniform_values(2 * 3 * 2 * 2, 30);
  std::vector<double> expected;
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = (i / 4) % 3;
    expected.push_back((x[i] - mu[c]) / std::sqrt(double(var[c]) + 1e-3) * gamma[c] + beta[c]);
  }
  EXPECT_TRUE(all_close(values(bn(from_vector(x, {2, 3, 2, 2}))), expected, kRtol, kAtol));
}

TEST(NnLayers, LayerNormNormalizesTrailingDims) {
  nn::LayerNorm ln({2, 3});
  auto state = random_state(ln, 40);
  ln.load_state_dict(state);
  std::vector<float> g = state["weight"].to_vector<float>(), b = state["bias"].to_vector<float>();
  std::vector<float> x = uniform_values(4 * 6, 41, -3, 3);
  std::vector<double> expected;
  for (int r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += x[r * 6 + i] / 6.0;
    for (int i = 0; i < 6; ++i) var += (x[r * 6 + i] - mean) * (x[r * 6 + i] - mean) / 6.0;
    for (int i = 0; i < 6; ++i)
      expected.push_back((x[r * 6 + i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i]);
  }
  EXPECT_TRUE(all_close(values(ln(from_vector(x, {4, 2, 3}))), expected, kRtol, kAtol));
}

TEST(NnLayers, EmbeddingPicksRows) {
  nn::Embedding emb(5, 3);
  auto state = random_state(emb, 50);
  emb.load_state_dict(state);
  std::vector<float> w = state["weight"].to_vector<float>();
  std::vector<int64_t> idx{4, 0, 2, 2, 1, 3};
  std::vector<double> expected;
  for (int64_t i : idx)
    for (int d = 0; d < 3; ++d) expected.push_back(w[size_t(i * 3 + d)]);
  Tensor y = emb(from_vector(idx, {2, 3}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(values(y), expected);  // a copy: exact
}

TEST(NnLayers, FunctionalReluAndFlattenBuildACnnAsSequential) {
  nn::Sequential cnn;
  cnn.emplace<nn::Conv2d>(1, 2, 3, 1, 1);
  cnn.emplace<nn::BatchNorm2d>(2);
  cnn.emplace<nn::Functional>(relu, "relu");
  cnn.emplace<nn::Flatten>();
  cnn.emplace<nn::Linear>(2 * 4 * 4, 3);
  Tensor x = from_vector(uniform_values(2 * 16, 60), {2, 1, 4, 4});
  EXPECT_EQ(cnn(x).sizes(), (std::vector<int64_t>{2, 3}));

  std::vector<float> v = uniform_values(12, 61);
  std::vector<double> expected;
  for (float f : v) expected.push_back(f > 0 ? f : 0);
  nn::ReLU relu_module;
  nn::Functional relu_fn(relu);
  EXPECT_EQ(values(relu_module(from_vector(v, {3, 4}))), expected);
  EXPECT_EQ(values(relu_fn(from_vector(v, {3, 4}))), expected);
  EXPECT_EQ(nn::Flatten()(from_vector(v, {1, 2, 2, 3})).sizes(), (std::vector<int64_t>{1, 12}));
  EXPECT_EQ(nn::Flatten(0)(from_vector(v, {1, 2, 2, 3})).sizes(), (std::vector<int64_t>{12}));
}

// ---- multi-head attention against a per-head reference

// out[b, i] for query [B, L, E], key/value [B, S, E], packed in_proj and out_proj; mask(b, h, i, j)
// is added to the scaled score, -inf to mask out.
std::vector<double> naive_mha(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int B, int L, int S, int E, int H,
                              const std::vector<float>& in_w, const std::vector<float>& in_b,
                              const std::vector<float>& out_w, const std::vector<float>& out_b,
                              const std::function<double(int, int, int, int)>& mask) {
  const int D = E / H;
  // Projection block `part` (0 q, 1 k, 2 v) of row `row` of x.
  auto project = [&](const std::vector<float>& x, int row, int part) {
    std::vector<double> out;
    for (int o = 0; o < E; ++o) {
      double acc = in_b[part * E + o];
      for (int i = 0; i < E; ++i) acc += double(in_w[(part * E + o) * E + i]) * x[row * E + i];
      out.push_back(acc);
    }
    return out;
  };
  std::vector<double> result;
  for (int b = 0; b < B; ++b) {
    std::vector<std::vector<double>> kp, vp;
    for (int j = 0; j < S; ++j) {
      kp.push_back(project(k, b * S + j, 1));
      vp.push_back(project(v, b * S + j, 2));
    }
    for (int i = 0; i < L; ++i) {
      std::vector<double> qp = project(q, b * L + i, 0), heads_out(E, 0.0);
      for (int h = 0; h < H; ++h) {
        std::vector<double> p(S);
        double top = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < S; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += qp[h * D + d] * kp[j][h * D + d];
          p[j] = dot / std::sqrt(double(D)) + mask(b, h, i, j);
          top = std::max(top, p[j]);
        }
        double total = 0;
        for (double& e : p) total += (e = std::exp(e - top));
        for (int j = 0; j < S; ++j)
          for (int d = 0; d < D; ++d) heads_out[h * D + d] += p[j] / total * vp[j][h * D + d];
      }
      for (int o = 0; o < E; ++o) {
        double acc = out_b[o];
        for (int e = 0; e < E; ++e) acc += double(out_w[o * E + e]) * heads_out[e];
        result.push_back(acc);
      }
    }
  }
  return result;
}

struct MhaCase {
  static constexpr int B = 2, L = 3, S = 4, E = 8, H = 2;
  nn::MultiheadAttention mha{E, H};
  std::map<std::string, Tensor> state = random_state(mha, 70);
  std::vector<float> q = uniform_values(B * L * E, 80), k = uniform_values(B * S * E, 81),
                     v = uniform_values(B * S * E, 82);
  MhaCase() { mha.load_state_dict(state); }
  std::vector<double> expected(const std::function<double(int, int, int, int)>& mask) {
    return naive_mha(q, k, v, B, L, S, E, H, state["in_proj_weight"].to_vector<float>(),
                     state["in_proj_bias"].to_vector<float>(),
                     state["out_proj.weight"].to_vector<float>(),
                     state["out_proj.bias"].to_vector<float>(), mask);
  }
  Tensor run(const Tensor& mask = {}) {
    return mha(from_vector(q, {B, L, E}), from_vector(k, {B, S, E}), from_vector(v, {B, S, E}),
               mask);
  }
};

TEST(NnAttention, MatchesNaivePerHeadComputationWithoutMask) {
  MhaCase c;
  Tensor y = c.run();
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{MhaCase::B, MhaCase::L, MhaCase::E}));
  EXPECT_TRUE(all_close(values(y), c.expected([](int, int, int, int) { return 0.0; }), kRtol,
                        kAtol));
}

TEST(NnAttention, AdditiveFloatMaskIsAddedToScores) {
  MhaCase c;
  std::vector<float> mask = uniform_values(MhaCase::L * MhaCase::S, 90, -3, 3);
  Tensor y = c.run(from_vector(mask, {MhaCase::L, MhaCase::S}));
  auto m = [&](int, int, int i, int j) { return double(mask[size_t(i * MhaCase::S + j)]); };
  EXPECT_TRUE(all_close(values(y), c.expected(m), kRtol, kAtol));
}

TEST(NnAttention, BoolMaskTrueMeansMaskedOut) {
  MhaCase c;
  const double inf = std::numeric_limits<double>::infinity();
  // Causal-style: key j is hidden from query i when j > i + 1 (every row keeps some keys).
  std::vector<bool> mask;
  for (int i = 0; i < MhaCase::L; ++i)
    for (int j = 0; j < MhaCase::S; ++j) mask.push_back(j > i + 1);
  Tensor y = c.run(from_vector(mask, {MhaCase::L, MhaCase::S}));
  EXPECT_TRUE(all_close(values(y), c.expected([&](int, int, int i, int j) {
    return j > i + 1 ? -inf : 0.0;
  }), kRtol, kAtol));
}

TEST(NnAttention, PerBatchAndHeadMaskIsIndexedBatchMajor) {
  MhaCase c;
  const int B = MhaCase::B, H = MhaCase::H, L = MhaCase::L, S = MhaCase::S;
  std::vector<float> mask = uniform_values(size_t(B * H * L * S), 91, -4, 4);
  Tensor y = c.run(from_vector(mask, {B * H, L, S}));
  auto m = [&](int b, int h, int i, int j) {
    return double(mask[size_t(((b * H + h) * L + i) * S + j)]);
  };
  EXPECT_TRUE(all_close(values(y), c.expected(m), kRtol, kAtol));
}

TEST(NnAttention, SequenceFirstLayoutMatchesBatchFirst) {
  MhaCase c;
  nn::MultiheadAttention seq_first(MhaCase::E, MhaCase::H, true, /*batch_first=*/false);
  seq_first.load_state_dict(c.state);
  auto seq_major = [](const Tensor& t) { return transpose(t, 0, 1); };
  Tensor y = seq_first(seq_major(from_vector(c.q, {MhaCase::B, MhaCase::L, MhaCase::E})),
                       seq_major(from_vector(c.k, {MhaCase::B, MhaCase::S, MhaCase::E})),
                       seq_major(from_vector(c.v, {MhaCase::B, MhaCase::S, MhaCase::E})));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{MhaCase::L, MhaCase::B, MhaCase::E}));
  EXPECT_TRUE(all_close(values(seq_major(y)), values(c.run()), kRtol, kAtol));
}

TEST(NnAttention, RejectsBadInputsNamingTheModule) {
  MhaCase c;
  std::string msg = error_of([&] { c.mha(ones({2, 3, 8}), ones({2, 4}), ones({2, 4, 8})); });
  EXPECT_NE(msg.find("MultiheadAttention"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[2,4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nn_test.cpp"), std::string::npos) << msg;
  EXPECT_THROW(nn::MultiheadAttention(10, 3), Error);  // embed_dim not divisible by heads
}

// ---- scopes in provenance and errors

TEST(NnScope, TracedNodesCarryModulePathAndTheCallersLine) {
  Net net;
  Tracer tracer(Device::cpu());
  TracingScope tracing(tracer);
  Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 3), 4}}, "x");
  int line = __LINE__ + 1;
  Tensor y = net(x);
  tracer.set_outputs({y});
  std::map<std::string, int> nodes_per_scope;
  for (const auto& node : tracer.graph().nodes()) {
    ASSERT_EQ(node->provenance.origins.size(), 1u);
    const Origin& o = node->provenance.origins[0];
    EXPECT_EQ(o.line, line) << op_name(node->kind);
    EXPECT_NE(o.file.find("nn_test.cpp"), std::string::npos) << o.file;
    ++nodes_per_scope[o.scope];
  }
  EXPECT_GE(nodes_per_scope["features.0"], 1);
  EXPECT_EQ(nodes_per_scope["features.1"], 1);  // the relu
  EXPECT_GE(nodes_per_scope["head"], 1);
  EXPECT_EQ(nodes_per_scope.size(), 3u) << "every op runs inside some module";
  EXPECT_EQ(tracer.captured().size(), 4u);  // the parameters, bound as inputs

  // An unnamed root module records its type name.
  nn::Linear lin(4, 2);
  tracer.set_outputs({lin(x)});
  EXPECT_EQ(tracer.graph().nodes().back()->provenance.origins[0].scope, "Linear");
}

TEST(NnScope, ErrorsInsideAModuleNameItsScopeAndTheCallersLine) {
  Net net;
  int line = __LINE__ + 1;
  std::string msg = error_of([&] { net(ones({2, 5})); });
  EXPECT_NE(msg.find("[features.0]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[2,5]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nn_test.cpp:" + std::to_string(line)), std::string::npos) << msg;

  nn::Sequential seq;
  seq.emplace<nn::BatchNorm2d>(3);
  msg = error_of([&] { seq(ones({2, 3})); });
  EXPECT_NE(msg.find("BatchNorm2d '0'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32[2,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4-d"), std::string::npos) << msg;
}

TEST(NnModule, MisuseIsReportedClearly) {
  Net net;
  nn::Linear orphan(2, 2);
  struct Holder : nn::Module {
    void add(const std::string& name, nn::Module& m) { register_module(name, m); }
    void param(const std::string& name) { register_parameter(name, ones({1})); }
  } holder;
  holder.add("lin", orphan);
  EXPECT_THROW(holder.add("again", orphan), Error);      // already has a parent
  EXPECT_THROW(holder.add("x", net.head), Error);        // so does this one
  EXPECT_THROW(holder.param("lin"), Error);              // taken by a submodule
  EXPECT_THROW(holder.param(""), Error);
  EXPECT_THROW(nn::Conv2d(3, 4, 3, 1, 0, 1, 2), Error);  // 3 channels in 2 groups
  EXPECT_THROW(nn::Linear(0, 2), Error);
}

}  // namespace
}  // namespace kiln
