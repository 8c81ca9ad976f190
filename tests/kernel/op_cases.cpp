// The op configuration table (see op_cases.h).
#include "kernel/op_cases.h"

#include <cmath>
#include <cstring>
#include <cstdio>
#include <memory>
#include <random>

#include "core/frontend/tensor.h"
#include "core/support/error.h"

namespace kiln::kernel::testing {
namespace {
// f32 1e-5 relative (+1e-6 absolute for the printer's erf/tanh approximations, |error| < 2e-7);
// f64 the same, since GLSL computes double transcendentals in float; 16-bit floats one or two ulps.
}  // namespace

Tolerance default_tolerance(OpKind kind, DType out) {

  if (op_def(kind).family == OpFamily::Shape || kind == OpKind::Cast) return {};
  switch (out) {
    case DType::F32: case DType::F64: return {1e-5, 1e-6};
    case DType::F16: return {2e-3, 2e-3};
    case DType::BF16: return {1.6e-2, 1.6e-2};
    default: return {};
  }
}

namespace {

// --- the table --------------------------------------------------------------------------------

std::string dt(DType t) { return std::string(dtype_name(t)); }

const std::vector<DType> kFloats = {DType::F32, DType::F16, DType::BF16, DType::F64};
const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                     DType::I32, DType::I64, DType::U8};
const std::vector<DType> kAll = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                 DType::I32, DType::I64, DType::U8, DType::Bool};
const std::vector<DType> kMovement = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::U8, DType::Bool};
const std::vector<std::vector<int64_t>> kUnaryShapes = {{}, {7}, {3, 5}, {2, 3, 4}};

void add_unary(std::vector<Case>& t, OpKind k, const std::vector<DType>& dtypes, Gen gen = Gen::Normal,
               AttrMap attrs = {}, const std::string& tag = "") {
  for (DType d : dtypes)
    for (const auto& s : kUnaryShapes)
      t.push_back({std::string(op_name(k)) + tag + "_" + dt(d) + "_r" + std::to_string(s.size()), k,
                   attrs, {{d, s, gen}}});
}

// Shape pairs: same, both-ways broadcast, rank mismatch, scalars.
const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> kBinaryShapes = {
    {{3, 4}, {3, 4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{}, {5}}, {{}, {}}, {{6}, {6}}};

void add_binary(std::vector<Case>& t, OpKind k, const std::vector<DType>& dtypes, Gen ga = Gen::Normal,
                Gen gb = Gen::Normal, AttrMap attrs = {}, const std::string& tag = "") {
  for (DType d : dtypes)
    for (size_t i = 0; i < kBinaryShapes.size(); ++i)
      t.push_back({std::string(op_name(k)) + tag + "_" + dt(d) + "_s" + std::to_string(i), k, attrs,
                   {{d, kBinaryShapes[i].first, ga}, {d, kBinaryShapes[i].second, gb}}});
}

void add_mixed(std::vector<Case>& t, OpKind k, Gen gb = Gen::Normal) {
  const std::vector<std::pair<DType, DType>> pairs = {
      {DType::I32, DType::F32}, {DType::U8, DType::I64}, {DType::F16, DType::F32},
      {DType::Bool, DType::I32}, {DType::BF16, DType::F16}};
  for (auto [a, b] : pairs)
    t.push_back({std::string(op_name(k)) + "_mixed_" + dt(a) + "_" + dt(b), k, {},
                 {{a, {2, 3}, Gen::Normal}, {b, {3}, gb}}});
}

void add_reduce(std::vector<Case>& t, OpKind k, const std::vector<DType>& dtypes, Gen gen,
                const std::string& tag = "") {
  struct R { std::vector<int64_t> shape, dims; bool keep; };
  const std::vector<R> rs = {{{2, 3, 4}, {}, false}, {{2, 3, 4}, {1}, false}, {{2, 3, 4}, {0, 2}, true},
                             {{2, 3, 4}, {-1}, true}, {{5}, {0}, false}, {{}, {}, false},
                             {{4, 50}, {1}, false}};
  for (DType d : dtypes)
    for (size_t i = 0; i < rs.size(); ++i)
      t.push_back({std::string(op_name(k)) + tag + "_" + dt(d) + "_c" + std::to_string(i), k,
                   {{"dims", rs[i].dims}, {"keepdim", rs[i].keep}}, {{d, rs[i].shape, gen}}});
}

void add_dim_op(std::vector<Case>& t, OpKind k, const std::vector<DType>& dtypes, Gen gen, bool keepdim) {
  struct R { std::vector<int64_t> shape; int64_t dim; bool keep; };
  std::vector<R> rs = {{{3, 5}, 1, false}, {{3, 5}, 0, true}, {{2, 3, 4}, -1, false},
                       {{2, 3, 4}, 1, true}, {{6}, 0, false}, {{}, 0, false}};
  for (DType d : dtypes)
    for (size_t i = 0; i < rs.size(); ++i) {
      AttrMap a{{"dim", rs[i].dim}};
      if (keepdim) a.set("keepdim", rs[i].keep);
      t.push_back({std::string(op_name(k)) + "_" + dt(d) + "_c" + std::to_string(i), k, a,
                   {{d, rs[i].shape, gen}}});
    }
}

std::shared_ptr<const Literal> literal_of(DType d, std::vector<int64_t> shape) {
  auto lit = std::make_shared<Literal>();
  lit->dtype = d;
  lit->shape = shape;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> vals;
  for (int64_t i = 0; i < n; ++i) vals.push_back(double((i * 7) % 11) - 3.0);
  lit->bytes.resize(size_t(n) * dtype_size(d));
  convert_elements(vals.data(), DType::F64, lit->bytes.data(), d, size_t(n));
  return lit;
}

std::vector<Case> build_table() {
  std::vector<Case> t;
  using O = OpKind;
  // Unary.
  for (O k : {O::Exp, O::Log, O::Sqrt, O::Rsqrt, O::Reciprocal})
    add_unary(t, k, kFloats, k == O::Exp ? Gen::Normal : Gen::Positive);
  for (O k : {O::Sin, O::Cos, O::Tanh, O::Sigmoid, O::Silu, O::Erf}) add_unary(t, k, kFloats);
  add_unary(t, O::LeakyRelu, kFloats, Gen::Normal, {{"alpha", 0.1}});
  add_unary(t, O::Elu, kFloats, Gen::Normal, {{"alpha", 0.7}});
  add_unary(t, O::Gelu, kFloats, Gen::Normal, {{"approximate", std::string("none")}});
  add_unary(t, O::Gelu, kFloats, Gen::Normal, {{"approximate", std::string("tanh")}}, "_tanh");
  for (O k : {O::Neg, O::Abs, O::Relu, O::Floor, O::Ceil, O::Round, O::Sign}) add_unary(t, k, kAll);
  add_unary(t, O::LogicalNot, kAll);
  add_unary(t, O::Clip, kFloats, Gen::Normal, {{"min", -0.5}, {"max", 0.75}});
  add_unary(t, O::Clip, {DType::I32, DType::I64}, Gen::Normal, {{"min", -2.0}, {"max", 3.0}});
  add_unary(t, O::Clip, {DType::U8}, Gen::Normal, {{"min", 2.0}, {"max", 9.0}});
  add_unary(t, O::Clip, {DType::F32, DType::I32}, Gen::Normal, {{"max", 1.0}}, "_maxonly");
  for (DType from : kAll)
    for (DType to : kAll)
      t.push_back({"cast_" + dt(from) + "_to_" + dt(to), O::Cast, {{"dtype", to}},
                   {{from, {3, 4}, to == DType::U8 ? Gen::NonNeg : Gen::Normal}}});
  for (DType from : kFloats)
    for (DType to : {DType::U8, DType::I32, DType::I64})
      t.push_back({"cast_wide_" + dt(from) + "_to_" + dt(to), O::Cast, {{"dtype", to}}, {{from, {4, 5}, Gen::Wide}}});
  // Binary.
  for (O k : {O::Add, O::Sub, O::Mul, O::Maximum, O::Minimum}) {
    add_binary(t, k, kAll);
    add_mixed(t, k);
  }
  add_binary(t, O::Div, kNumeric, Gen::Normal, Gen::Positive);
  add_mixed(t, O::Div, Gen::Positive);
  add_binary(t, O::Pow, kNumeric, Gen::Positive, Gen::Normal, {}, "_posbase");
  add_binary(t, O::Pow, kNumeric, Gen::Normal, Gen::Exponent, {}, "_intexp");
  add_binary(t, O::Mod, kNumeric, Gen::Normal, Gen::Positive, {{"fmod", false}});
  add_binary(t, O::Mod, {DType::F32, DType::I32, DType::I64}, Gen::Normal, Gen::NonZero, {{"fmod", false}},
             "_negdiv");
  add_binary(t, O::Mod, {DType::F32, DType::I32, DType::I64}, Gen::Normal, Gen::NonZero, {{"fmod", true}},
             "_fmod_negdiv");
  add_binary(t, O::Div, {DType::I32, DType::I64}, Gen::Normal, Gen::NonZero, {}, "_negdiv");
  add_binary(t, O::Mod, kNumeric, Gen::Normal, Gen::Positive, {{"fmod", true}}, "_fmod");
  for (O k : {O::Eq, O::Ne, O::Lt, O::Le, O::Gt, O::Ge, O::LogicalAnd, O::LogicalOr, O::LogicalXor}) {
    add_binary(t, k, kAll);
    add_mixed(t, k);
  }
  for (DType d : kAll)
    t.push_back({"where_" + dt(d), O::Where, {}, {{DType::Bool, {3, 1}}, {d, {1, 4}}, {d, {3, 4}}}});
  t.push_back({"where_rank0", O::Where, {}, {{DType::Bool, {}}, {DType::F32, {}}, {DType::F32, {}}}});
  t.push_back({"where_mixed_i32_f32", O::Where, {}, {{DType::Bool, {4}}, {DType::I32, {2, 4}}, {DType::F32, {1}}}});
  // ONNX's narrow and unsigned integers: each op's result wraps to the type's width; floats
  // convert saturating, as the reference converts.
  for (DType d : {DType::I8, DType::I16, DType::U16, DType::U32, DType::U64}) {
    for (O k : {O::Neg, O::Abs, O::Relu, O::Sign}) add_unary(t, k, {d});
    add_unary(t, O::Clip, {d}, Gen::Normal, {{"min", 2.0}, {"max", 9.0}});
    for (O k : {O::Add, O::Sub, O::Mul, O::Maximum, O::Minimum, O::Lt, O::Eq}) add_binary(t, k, {d});
    add_binary(t, O::Div, {d}, Gen::Normal, Gen::Positive);
    add_binary(t, O::Mod, {d}, Gen::Normal, Gen::Positive, {{"fmod", false}});
    add_binary(t, O::Pow, {d}, Gen::Normal, Gen::Exponent, {}, "_intexp");
    add_binary(t, O::Mul, {d}, Gen::Wide, Gen::Wide, {}, "_wrap");
    t.push_back({"cast_wide_f32_to_" + dt(d), O::Cast, {{"dtype", d}}, {{DType::F32, {4, 5}, Gen::Wide}}});
    for (DType to : {DType::F32, DType::I64, DType::U8})
      t.push_back({"cast_" + dt(d) + "_to_" + dt(to), O::Cast, {{"dtype", to}}, {{d, {4, 5}, Gen::Wide}}});
  }
  t.push_back({"rand_uniform", O::RandUniform, {{"shape", Shape{3, 70}}}, {{DType::U64, {}, Gen::NonNeg}}});
  t.push_back({"rand_uniform_mix", O::RandUniform, {{"shape", Shape{5}}, {"mix", true}}, {{DType::U64, {}, Gen::NonNeg}}});
  // Reductions. Sum tolerances grow with the 50-element rows: atol 1e-5 covers reordering.
  for (O k : {O::Sum, O::ReduceMax, O::ReduceMin}) add_reduce(t, k, kAll, Gen::Normal);
  add_reduce(t, O::Prod, kAll, Gen::NearOne);
  add_reduce(t, O::Mean, kFloats, Gen::Normal);
  add_reduce(t, O::LogSumExp, kFloats, Gen::Normal);
  add_reduce(t, O::LogSumExp, {DType::F32}, Gen::WithNegInf, "_neginf");
  // Long f32 sums into few outputs: GPU dialects reduce them one workgroup per output
  // (EmittedKernel::invocations_per_element), adding in another order than the reference.
  const Tolerance long_sum{1e-5, 1e-3};
  t.push_back({"sum_long_rows", O::Sum, {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}},
               {{DType::F32, {3, 2048}, Gen::Normal}}, long_sum});
  t.push_back({"sum_long_strided", O::Sum, {{"dims", std::vector<int64_t>{0, 2}}, {"keepdim", true}},
               {{DType::F32, {40, 3, 33}, Gen::Normal}}, long_sum});
  t.push_back({"mean_all_long", O::Mean, {{"dims", std::vector<int64_t>{}}, {"keepdim", false}},
               {{DType::F32, {5000}, Gen::Normal}}, long_sum});
  for (O k : {O::ArgMax, O::ArgMin}) {
    add_dim_op(t, k, kAll, Gen::Normal, true);
    add_dim_op(t, k, {DType::F32, DType::F16}, Gen::WithNaN, true);
    for (size_t i = t.size() - 12; i < t.size(); ++i) t[i].name += "_nan";
  }
  for (O k : {O::Softmax, O::LogSoftmax}) add_dim_op(t, k, kFloats, Gen::Normal, false);
  for (Case& c : t) {
    if (op_def(c.kind).family != OpFamily::Reduce || !is_floating(c.inputs[0].dtype)) continue;
    c.tol = default_tolerance(c.kind, c.inputs[0].dtype);
    c.tol->atol = std::max(c.tol->atol, 1e-5);
  }
  // Linalg.
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64}) {
    Gen g = is_floating(d) ? Gen::Normal : Gen::NearOne;
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> mm = {
        {{3, 4}, {4, 5}}, {{4}, {4, 5}}, {{3, 4}, {4}}, {{4}, {4}}, {{2, 3, 4}, {4, 5}},
        {{2, 1, 3, 4}, {3, 4, 2}}, {{1, 1}, {1, 1}}};
    for (size_t i = 0; i < mm.size(); ++i)
      t.push_back({"matmul_" + dt(d) + "_s" + std::to_string(i), O::MatMul, {},
                   {{d, mm[i].first, g}, {d, mm[i].second, g}}});
    t.push_back({"gemm_" + dt(d), O::Gemm, {}, {{d, {3, 4}, g}, {d, {4, 5}, g}}});
    t.push_back({"gemm_c_" + dt(d), O::Gemm, {}, {{d, {3, 4}, g}, {d, {4, 5}, g}, {d, {5}, g}}});
    t.push_back({"linear_" + dt(d), O::Linear, {}, {{d, {2, 3, 4}, g}, {d, {5, 4}, g}, {d, {5}, g}}});
    t.push_back({"linear_nobias_" + dt(d), O::Linear, {}, {{d, {4}, g}, {d, {5, 4}, g}}});
  }
  t.push_back({"gemm_trans_alpha_beta", O::Gemm,
               {{"trans_a", true}, {"trans_b", true}, {"alpha", 0.5}, {"beta", -2.0}},
               {{DType::F32, {4, 3}}, {DType::F32, {5, 4}}, {DType::F32, {3, 5}}}});
  t.push_back({"gemm_c_bcast", O::Gemm, {{"beta", 0.25}},
               {{DType::F32, {3, 4}}, {DType::F32, {4, 5}}, {DType::F32, {3, 1}}}});
  // Conv family.
  using I = std::vector<int64_t>;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    t.push_back({"conv2d_" + dt(d), O::Conv, {}, {{d, {1, 2, 5, 5}}, {d, {3, 2, 3, 3}}, {d, {3}}}});
    t.push_back({"max_pool2d_" + dt(d), O::MaxPool, {{"kernel", I{2, 2}}, {"stride", I{2, 2}}},
                 {{d, {1, 2, 5, 4}}}});
    t.push_back({"avg_pool2d_" + dt(d), O::AvgPool, {{"kernel", I{3, 3}}, {"padding", I{1, 1, 1, 1}}},
                 {{d, {2, 2, 4, 4}}}});
    t.push_back({"global_avg_pool_" + dt(d), O::GlobalAvgPool, {}, {{d, {2, 3, 4, 5}}}});
    t.push_back({"max_pool_grad2d_" + dt(d), O::MaxPoolGrad, {{"kernel", I{3, 3}}, {"stride", I{2, 2}}},
                 {{d, {1, 2, 5, 5}}, {d, {1, 2, 2, 2}}}});
    t.push_back({"conv_transpose2d_" + dt(d), O::ConvTranspose, {}, {{d, {1, 2, 3, 3}}, {d, {2, 3, 2, 2}}}});
    t.push_back({"conv_weight_grad2d_" + dt(d), O::ConvWeightGrad, {{"kernel", I{3, 3}}},
                 {{d, {2, 2, 5, 5}}, {d, {2, 3, 3, 3}}}});
  }
  // Winograd F(2x2, 3x3): odd sizes (cropped tiles), asymmetric padding, f32 and f64.
  for (DType d : {DType::F32, DType::F64}) {
    t.push_back({"winograd_weights_" + dt(d), O::WinogradWeights, {}, {{d, {3, 2, 3, 3}}}});
    t.push_back({"winograd_input_" + dt(d), O::WinogradInput, {{"padding", I{1, 0, 2, 1}}}, {{d, {2, 3, 5, 6}}}});
    t.push_back({"winograd_output_" + dt(d), O::WinogradOutput, {{"size", I{5, 4}}}, {{d, {16, 2, 3, 2, 3}}}});
  }
  t.push_back({"conv_weight_grad2d_stride_pad_dil", O::ConvWeightGrad,
               {{"kernel", I{3, 2}}, {"stride", I{2, 1}}, {"padding", I{1, 0, 2, 1}}, {"dilation", I{1, 2}}},
               {{DType::F32, {2, 2, 7, 6}}, {DType::F32, {2, 4, 4, 4}}}});
  // The output gradient stops a row short of the conv's output: the last input row reaches no window.
  t.push_back({"conv_weight_grad2d_short", O::ConvWeightGrad, {{"kernel", I{2, 2}}, {"stride", I{2, 2}}},
               {{DType::F32, {1, 3, 6, 5}}, {DType::F32, {1, 2, 2, 2}}}});
  t.push_back({"conv_weight_grad1d_groups", O::ConvWeightGrad,
               {{"kernel", I{3}}, {"groups", int64_t(2)}, {"padding", I{1, 1}}},
               {{DType::F64, {3, 4, 7}}, {DType::F64, {3, 6, 7}}}});
  t.push_back({"conv2d_stride_pad_dil", O::Conv,
               {{"stride", I{2, 1}}, {"padding", I{1, 0, 2, 1}}, {"dilation", I{1, 2}}},
               {{DType::F32, {2, 2, 7, 6}}, {DType::F32, {4, 2, 3, 2}}}});
  t.push_back({"conv1d_groups", O::Conv, {{"groups", int64_t(2)}, {"padding", I{1, 1}}},
               {{DType::F32, {2, 4, 7}}, {DType::F32, {6, 2, 3}}, {DType::F32, {6}}}});
  t.push_back({"conv2d_depthwise", O::Conv, {{"groups", int64_t(3)}},
               {{DType::F32, {1, 3, 4, 4}}, {DType::F32, {3, 1, 2, 2}}}});
  t.push_back({"conv_transpose2d_stride_pad_outpad", O::ConvTranspose,
               {{"stride", I{2, 2}}, {"padding", I{1, 1, 1, 1}}, {"output_padding", I{1, 1}}},
               {{DType::F32, {1, 2, 4, 4}}, {DType::F32, {2, 3, 3, 3}}, {DType::F32, {3}}}});
  t.push_back({"conv_transpose1d_groups", O::ConvTranspose, {{"groups", int64_t(2)}, {"dilation", I{2}}},
               {{DType::F32, {2, 4, 5}}, {DType::F32, {4, 1, 3}}}});
  t.push_back({"max_pool2d_pad_ceil", O::MaxPool,
               {{"kernel", I{3, 3}}, {"stride", I{2, 2}}, {"padding", I{1, 1, 1, 1}}, {"ceil_mode", true}},
               {{DType::F32, {1, 2, 6, 5}}}});
  t.push_back({"max_pool1d_i32", O::MaxPool, {{"kernel", I{2}}}, {{DType::I32, {2, 3, 7}}}});
  // Windows overlap and hang over padding; ties and a NaN decide which tap wins.
  t.push_back({"max_pool_grad2d_pad_ceil_ties", O::MaxPoolGrad,
               {{"kernel", I{3, 3}}, {"stride", I{2, 2}}, {"padding", I{1, 1, 1, 1}}, {"ceil_mode", true}},
               {{DType::F32, {1, 2, 6, 5}, Gen::WithNaN}, {DType::F32, {1, 2, 4, 3}}}});
  t.push_back({"max_pool_grad2d_dilated", O::MaxPoolGrad,
               {{"kernel", I{2, 2}}, {"stride", I{1, 2}}, {"dilation", I{2, 2}}},
               {{DType::F32, {2, 1, 7, 7}}, {DType::F32, {2, 1, 5, 3}}}});
  t.push_back({"max_pool_grad1d", O::MaxPoolGrad, {{"kernel", I{3}}, {"stride", I{2}}, {"padding", I{1, 1}}},
               {{DType::F64, {2, 3, 9}}, {DType::F64, {2, 3, 5}}}});
  t.push_back({"avg_pool2d_include_pad", O::AvgPool,
               {{"kernel", I{2, 3}}, {"padding", I{1, 1, 1, 1}}, {"count_include_pad", true}},
               {{DType::F32, {1, 2, 5, 5}}}});
  t.push_back({"avg_pool1d_ceil", O::AvgPool, {{"kernel", I{3}}, {"stride", I{2}}, {"ceil_mode", true}},
               {{DType::F32, {1, 2, 8}}}});
  t.push_back({"global_avg_pool1d", O::GlobalAvgPool, {}, {{DType::F32, {2, 3, 6}}}});
  // Norms.
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    t.push_back({"layer_norm_" + dt(d), O::LayerNorm, {{"axis", int64_t(-1)}},
                 {{d, {2, 3, 8}}, {d, {8}}, {d, {8}}}});
    t.push_back({"batch_norm_" + dt(d), O::BatchNorm, {},
                 {{d, {2, 3, 4, 4}}, {d, {3}}, {d, {3}, Gen::Variance}, {d, {3}}, {d, {3}}}});
    t.push_back({"group_norm_" + dt(d), O::GroupNorm, {{"num_groups", int64_t(2)}},
                 {{d, {2, 4, 3, 3}}, {d, {4}}, {d, {4}}}});
  }
  t.push_back({"layer_norm_axis1_noparams", O::LayerNorm, {{"axis", int64_t(1)}}, {{DType::F32, {2, 3, 4}}}});
  t.push_back({"layer_norm_weight_only", O::LayerNorm, {{"axis", int64_t(-2)}, {"eps", 1e-3}},
               {{DType::F32, {3, 4, 5}}, {DType::F32, {4, 5}}}});
  t.push_back({"layer_norm_bf16_f32params", O::LayerNorm, {{"axis", int64_t(-1)}},
               {{DType::BF16, {4, 16}}, {DType::F32, {16}}, {DType::F32, {16}}}});
  t.push_back({"batch_norm_noaffine_3d", O::BatchNorm, {},
               {{DType::F32, {2, 3, 5}}, {DType::F32, {3}}, {DType::F32, {3}, Gen::Variance}}});
  t.push_back({"group_norm_noparams_1group", O::GroupNorm, {{"num_groups", int64_t(1)}},
               {{DType::F32, {2, 6, 5}}}});
  // Data movement: bit-exact.
  for (DType d : kMovement) {
    std::string s = "_" + dt(d);
    t.push_back({"constant" + s, O::Constant, {{"value", literal_of(d, {2, 3})}}, {}});
    t.push_back({"reshape" + s, O::Reshape, {{"shape", std::vector<SymInt>{6, -1}}}, {{d, {2, 3, 4}}}});
    t.push_back({"permute" + s, O::Permute, {{"dims", I{2, 0, 1}}}, {{d, {2, 3, 4}}}});
    t.push_back({"slice" + s, O::Slice, {{"axes", I{0, 2}}, {"starts", I{1, -1}}, {"ends", I{3, 0}},
                                          {"steps", I{1, -2}}}, {{d, {4, 3, 6}}}});
    t.push_back({"concat" + s, O::Concat, {{"dim", int64_t(1)}}, {{d, {2, 1, 3}}, {d, {2, 4, 3}}, {d, {2, 2, 3}}}});
    t.push_back({"split" + s, O::Split, {{"dim", int64_t(-1)}, {"sizes", I{1, 3, 2}}}, {{d, {3, 6}}}});
    t.push_back({"gather" + s, O::Gather, {{"dim", int64_t(1)}},
                 {{d, {3, 5}}, {DType::I64, {2, 4}, Gen::Index, 5}}});
    t.push_back({"index_select" + s, O::IndexSelect, {{"dim", int64_t(0)}},
                 {{d, {4, 3}}, {DType::I32, {2, 3}, Gen::Index, 4}}});
    t.push_back({"expand" + s, O::Expand, {{"shape", std::vector<SymInt>{2, 3, 4}}}, {{d, {3, 1}}}});
    t.push_back({"pad" + s, O::Pad, {{"pads", I{1, 0, 2, -1}}, {"value", 1.0}}, {{d, {3, 4}}}});
    t.push_back({"tile" + s, O::Tile, {{"repeats", I{2, 1, 3}}}, {{d, {2, 3, 2}}}});
  }
  t.push_back({"constant_rank0", O::Constant, {{"value", literal_of(DType::F32, {})}}, {}});
  t.push_back({"sym_ints_i64", O::SymInts, {{"values", std::vector<SymInt>{7, 0, -3, 12}}}, {}});
  t.push_back({"arange_i64", O::Arange, {{"start", 3.0}, {"step", -2.0}, {"count", std::vector<SymInt>{6}}}, {}});
  t.push_back({"arange_f32", O::Arange,
               {{"start", 0.25}, {"step", 0.5}, {"count", std::vector<SymInt>{5}}, {"dtype", DType::F32}}, {}});
  t.push_back({"sym_ints_i32_scalar", O::SymInts,
               {{"values", std::vector<SymInt>{5}}, {"dtype", DType::I32}, {"scalar", true}}, {}});
  t.push_back({"reshape_to_rank0", O::Reshape, {{"shape", std::vector<SymInt>{}}}, {{DType::F32, {1, 1}}}});
  t.push_back({"permute_rank1", O::Permute, {{"dims", I{0}}}, {{DType::F32, {5}}}});
  t.push_back({"slice_default_axes", O::Slice, {{"starts", I{0, 1}}, {"ends", I{100, 3}}}, {{DType::F32, {3, 4}}}});
  t.push_back({"concat_rank1_i32", O::Concat, {}, {{DType::I32, {3}}, {DType::I32, {0}}, {DType::I32, {2}}}});
  {  // 13 inputs of distinct sizes: too many params for one kernel, so a tree through temps
    std::vector<Input> wide;
    for (int64_t k = 1; k <= 13; ++k) wide.push_back({DType::F32, {2, k, 3, 2}});
    t.push_back({"concat_wide_tree", O::Concat, {{"dim", int64_t(1)}}, wide});
  }
  t.push_back({"split_dim0", O::Split, {{"sizes", I{2, 0, 1}}}, {{DType::F32, {3, 2}}}});
  t.push_back({"gather_dim0_i32", O::Gather, {}, {{DType::F32, {4, 3}}, {DType::I32, {2, 3}, Gen::Index, 4}}});
  t.push_back({"index_select_rank1_last", O::IndexSelect, {{"dim", int64_t(-1)}},
               {{DType::F32, {2, 5}}, {DType::I64, {7}, Gen::Index, 5}}});
  t.push_back({"index_select_rank0_index", O::IndexSelect, {{"dim", int64_t(1)}},
               {{DType::F32, {2, 5}}, {DType::I64, {}, Gen::Index, 5}}});
  t.push_back({"expand_from_rank0", O::Expand, {{"shape", std::vector<SymInt>{3, 2}}}, {{DType::F32, {}}}});
  t.push_back({"expand_minus1", O::Expand, {{"shape", std::vector<SymInt>{2, -1, 4}}}, {{DType::F32, {3, 1}}}});
  t.push_back({"pad_reflect", O::Pad, {{"pads", I{2, 1, 1, 2}}, {"mode", std::string("reflect")}}, {{DType::F32, {4, 3}}}});
  t.push_back({"pad_edge", O::Pad, {{"pads", I{1, 3, 2, 0}}, {"mode", std::string("edge")}}, {{DType::I64, {2, 3}}}});
  t.push_back({"tile_rank1", O::Tile, {{"repeats", I{3}}}, {{DType::F32, {4}}}});
  // Tens of thousands of elements: the evaluator must stay fast enough for real sizes.
  t.push_back({"large_add_f32", O::Add, {}, {{DType::F32, {256, 256}}, {DType::F32, {256}}}});
  t.push_back({"large_softmax_f32", O::Softmax, {{"dim", int64_t(-1)}}, {{DType::F32, {64, 512}}}});
  t.push_back({"large_matmul_f32", O::MatMul, {}, {{DType::F32, {64, 96}}, {DType::F32, {96, 80}}}});
  t.push_back({"large_conv2d_f32", O::Conv, {{"padding", I{1, 1, 1, 1}}},
               {{DType::F32, {1, 8, 24, 24}}, {DType::F32, {8, 8, 3, 3}}}});
  t.push_back({"large_permute_f32", O::Permute, {{"dims", I{1, 0}}}, {{DType::F32, {300, 200}}}});
  t.back().tol = Tolerance{};
  for (Case& c : t)
    if (c.name.rfind("large_", 0) == 0 && !c.tol) c.tol = Tolerance{1e-5, 1e-4};  // long dot products
  return t;
}

}  // namespace

const std::vector<Case>& table() {
  static const std::vector<Case> t = build_table();
  return t;
}

// --- running a case ---------------------------------------------------------------------------

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Draws values as doubles, then converts to the input's dtype the way the reference would.
std::vector<uint8_t> make_data(const Input& in, std::mt19937& rng) {
  int64_t n = numel_of(in.dims);
  std::vector<double> v(static_cast<size_t>(n));
  bool fl = is_floating(in.dtype);
  std::normal_distribution<double> normal(0, 1);
  auto uni = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto ints = [&](int64_t lo, int64_t hi) { return double(std::uniform_int_distribution<int64_t>(lo, hi)(rng)); };
  for (int64_t i = 0; i < n; ++i) {
    double& x = v[size_t(i)];
    switch (in.gen) {
      case Gen::Normal: case Gen::WithNaN: case Gen::WithNegInf:
        x = fl ? normal(rng) : is_unsigned(in.dtype) ? ints(0, 16) : in.dtype == DType::Bool ? ints(0, 1) : ints(-8, 8);
        break;
      case Gen::Positive: x = fl ? uni(0.1, 4) : ints(1, 8); break;
      case Gen::NonNeg: x = fl ? uni(0, 50) : in.dtype == DType::Bool ? ints(0, 1) : ints(0, 50); break;
      case Gen::NearOne: x = fl ? uni(0.5, 1.5) : is_unsigned(in.dtype) || in.dtype == DType::Bool ? ints(0, 2) : ints(-2, 2); break;
      case Gen::Exponent: x = fl ? ints(-3, 3) : ints(0, 4); break;
      case Gen::Index: x = ints(-in.bound, in.bound - 1); break;
      case Gen::Variance: x = uni(0.5, 2); break;
      case Gen::Wide: x = uni(-400, 400); break;
      case Gen::NonZero:
        x = fl ? normal(rng) : ints(1, 8) * (ints(0, 1) ? 1 : -1);
        break;
    }
  }
  if (in.gen == Gen::WithNaN && n > 2) {  // a NaN and a tie (argmax keeps the first of each)
    v[1] = NAN;
    v[size_t(n - 1)] = v[size_t(n - 2)];
  }
  if (in.gen == Gen::WithNegInf && n > 0) {
    int64_t row = in.dims.empty() ? 1 : in.dims.back();
    for (int64_t i = 0; i < std::min(row, n); ++i) v[size_t(i)] = -INFINITY;  // a whole -inf row
    if (n > row) v[size_t(row)] = -INFINITY;
  }
  std::vector<uint8_t> bytes(size_t(n) * dtype_size(in.dtype));
  convert_elements(v.data(), DType::F64, bytes.data(), in.dtype, size_t(n));
  return bytes;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> out(size_t(t.numel()) * dtype_size(t.dtype()));
  if (out.empty()) return out;
  if (t.dtype() == DType::Bool) {
    auto b = t.to_vector<uint8_t>();
    std::memcpy(out.data(), b.data(), out.size());
    return out;
  }
  visit_dtype(t.dtype(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      auto v = t.to_vector<T>();
      std::memcpy(out.data(), v.data(), out.size());
    }
  });
  return out;
}

double element(const std::vector<uint8_t>& bytes, DType d, int64_t i) {
  double v;
  convert_elements(bytes.data() + size_t(i) * dtype_size(d), d, &v, DType::F64, 1);
  return v;
}

// The first element where got and want differ beyond the tolerance, as a message; "" if none.
std::string first_mismatch(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType d,
                           Tolerance tol, const std::string& got_name) {
  int64_t n = int64_t(want.size() / dtype_size(d));
  bool exact = tol.rtol == 0 && tol.atol == 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = element(got, d, i), w = element(want, d, i);
    bool ok;
    if (exact) ok = std::memcmp(got.data() + i * dtype_size(d), want.data() + i * dtype_size(d), dtype_size(d)) == 0 ||
                    (std::isnan(g) && std::isnan(w));
    else if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
    else if (std::isinf(w) || std::isinf(g)) ok = g == w;
    else ok = std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w);
    if (!ok) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld: %s %.9g, reference %.9g", (long long)i, got_name.c_str(), g, w);
      return buf;
    }
  }
  return "";
}

}  // namespace kiln::kernel::testing
