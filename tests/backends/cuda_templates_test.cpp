// The CUDA templates without a GPU: the planner's choice per op, dtype and shape (and the cases it
// must leave to the generic lowering), every variant it can produce compiling with NVRTC and
// assembling with ptxas for sm_80 and sm_90 (and sm_75 for the variants without cp.async), and
// #line directives carrying a recorded op's file:line into the PTX line table. The compile tests
// skip with the reason when NVRTC is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "backends/cuda/cuda_templates.h"
#include "backends/cuda/nvrtc.h"
#include "backends/template_epilogue.h"
#include "core/ir/op.h"
#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/support/error.h"
#include "support/cuda_batch.h"

namespace kiln::cuda {
namespace {

// An op with its own storage: OpRun only borrows attributes and buffer views. Output types come
// from the op's shape rule, attributes are completed with their defaults.
struct TestOp {
  OpKind kind;
  AttrMap attrs;
  std::vector<BufferView> inputs, outputs;

  TestOp(OpKind k, std::vector<std::pair<DType, std::vector<int64_t>>> ins, AttrMap given = {}) : kind(k) {
    std::vector<TensorType> types;
    for (auto& [t, dims] : ins) {
      inputs.push_back({nullptr, t, dims});
      types.push_back({t, make_shape(dims)});
    }
    for (const TensorType& t : infer_types(k, types, given, {}, &attrs)) {
      std::vector<int64_t> dims;
      for (const SymInt& d : t.shape) dims.push_back(d.value());
      outputs.push_back({nullptr, t.dtype, dims});
    }
  }
  OpRun run() const { return {kind, attrs, inputs, outputs}; }
};

std::optional<TemplateLaunch> plan(const TestOp& op, int sm = 80) { return plan_cuda_template(op.run(), {}, sm); }

// The launch's parameter block read back as 32-bit words (ints, or floats where noted).
std::vector<int32_t> words(const TemplateLaunch& t) {
  std::vector<int32_t> w(t.push_constants.size() / 4);
  std::memcpy(w.data(), t.push_constants.data(), w.size() * 4);
  return w;
}
float word_f(const TemplateLaunch& t, size_t i) {
  float f;
  std::memcpy(&f, t.push_constants.data() + 4 * i, 4);
  return f;
}

constexpr DType F32 = DType::F32, F16 = DType::F16, BF16 = DType::BF16;
using Dims = std::vector<int64_t>;

// ---- planner: which template for which op and shape --------------------------------------------

TEST(CudaTemplatePlanner, F32MatmulTakesTheSimtTileWithCpAsyncFromSm80) {
  TestOp mm(OpKind::MatMul, {{F32, {256, 256}}, {F32, {256, 256}}});
  auto t = plan(mm, 80);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->language, "cuda");
  EXPECT_EQ(t->name, "cuda_matmul_f32_64x64_async");
  EXPECT_NE(t->source.find("#define ASYNC 1"), std::string::npos);
  EXPECT_EQ(t->args, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(t->groups, (std::array<uint32_t, 3>{4, 4, 1}));  // 256 / 64 tiles along N and M
  const auto w = words(*t);
  EXPECT_EQ(std::vector<int32_t>(w.begin(), w.begin() + 6), (std::vector<int32_t>{256, 256, 256, 256, 256, 256}));
  // sm_70/75: the same tile with plain loads (and no cp.async in the text).
  auto old = plan(mm, 70);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->name, "cuda_matmul_f32_64x64");
  EXPECT_NE(old->source.find("#define ASYNC 0"), std::string::npos);
}

TEST(CudaTemplatePlanner, LargeProductsTakeThe128Tile) {
  // 2048^2 outputs are 256 tiles of 128x128: enough blocks to fill a device.
  auto t = plan(TestOp(OpKind::MatMul, {{F32, {2048, 512}}, {F32, {512, 2048}}}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->name, "cuda_matmul_f32_128x128_async");
  EXPECT_EQ(t->groups, (std::array<uint32_t, 3>{16, 16, 1}));
  EXPECT_NE(t->source.find("#define THREADS 256"), std::string::npos);
}

TEST(CudaTemplatePlanner, BatchBroadcastBecomesTwoStridedBatchDims) {
  // A [4,1,M,K] broadcasts over B's batch 3: out batch (4, 3); A steps only with the outer index,
  // B only with the inner one.
  const int64_t m = 64, k = 32, n = 96;
  auto t = plan(TestOp(OpKind::MatMul, {{F32, {4, 1, m, k}}, {F32, {3, k, n}}}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->groups, (std::array<uint32_t, 3>{2, 1, 12}));
  const auto w = words(*t);  // m n k lda ldb ldo batch1 a_b0 a_b1 b_b0 b_b1 ...
  EXPECT_EQ(w[6], 3);
  EXPECT_EQ(w[7], m * k);
  EXPECT_EQ(w[8], 0);
  EXPECT_EQ(w[9], 0);
  EXPECT_EQ(w[10], k * n);
}

TEST(CudaTemplatePlanner, LinearAndGemmCarryTheirEpilogues) {
  auto lin = plan(TestOp(OpKind::Linear, {{F32, {8, 16, 128}}, {F32, {64, 128}}, {F32, {64}}}));
  ASSERT_TRUE(lin);
  EXPECT_EQ(lin->name, "cuda_matmul_f32_64x64_async_tb_c");
  EXPECT_EQ(lin->args, (std::vector<int>{0, 1, 2, 3}));
  auto w = words(*lin);
  EXPECT_EQ(w[0], 128);  // M = 8 * 16 rows
  EXPECT_EQ(w[4], 128);  // ldb = K: the weight is [N, K]
  EXPECT_EQ(w[11], 0);   // bias broadcast over rows
  EXPECT_EQ(w[12], 1);

  AttrMap attrs{{"trans_a", true}, {"trans_b", true}, {"alpha", 0.5}, {"beta", 2.0}};
  auto g = plan(TestOp(OpKind::Gemm, {{F32, {96, 80}}, {F32, {112, 96}}, {F32, {80, 1}}}, attrs));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name, "cuda_matmul_f32_64x64_async_ta_tb_c");
  w = words(*g);
  EXPECT_EQ(w[0], 80);   // M: A is stored [K, M]
  EXPECT_EQ(w[3], 80);   // lda = M
  EXPECT_EQ(w[11], 1);   // C is a column: one value per row
  EXPECT_EQ(w[12], 0);
  EXPECT_EQ(word_f(*g, 13), 0.5f);
  EXPECT_EQ(word_f(*g, 14), 2.0f);
}

TEST(CudaTemplatePlanner, HalfPrecisionMatmulUsesTensorCoresFromSm80Only) {
  TestOp h(OpKind::MatMul, {{F16, {128, 256}}, {F16, {256, 192}}});
  auto t = plan(h, 80);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->name, "cuda_matmul_wmma_f16");
  EXPECT_NE(t->source.find("nvcuda"), std::string::npos);
  EXPECT_EQ(t->groups, (std::array<uint32_t, 3>{3, 2, 1}));
  auto b = plan(TestOp(OpKind::Linear, {{BF16, {128, 256}}, {BF16, {64, 256}}, {BF16, {64}}}), 90);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->name, "cuda_matmul_wmma_bf16_tb_c");
  EXPECT_FALSE(plan(h, 75)) << "wmma variants are sm_80+";
  // Mixed dtypes (which the shape rule rejects anyway) keep the generic lowering.
  TestOp mixed(OpKind::Linear, {{F16, {128, 256}}, {F16, {64, 256}}, {F16, {64}}});
  mixed.inputs[2].dtype = F32;
  EXPECT_FALSE(plan(mixed));
}

TEST(CudaTemplatePlanner, RefusesWhatTheTemplatesDoNotCover) {
  EXPECT_FALSE(plan(TestOp(OpKind::MatMul, {{F32, {8, 8}}, {F32, {8, 8}}}))) << "below the flop threshold";
  EXPECT_FALSE(plan(TestOp(OpKind::MatMul, {{DType::I32, {256, 256}}, {DType::I32, {256, 256}}})));
  EXPECT_FALSE(plan(TestOp(OpKind::MatMul, {{F32, {70000, 1, 64}}, {F32, {70000, 64, 64}}})))
      << "a batch past the 65535 grid.z limit";
  EXPECT_FALSE(plan(TestOp(OpKind::Add, {{F32, {256, 256}}, {F32, {256, 256}}})));
  EXPECT_FALSE(plan(TestOp(OpKind::Relu, {{F32, {1 << 16}}})));
}

TEST(CudaTemplatePlanner, ConvTileFollowsTheGroupWidth) {
  AttrMap same{{"padding", Dims{1, 1, 1, 1}}};
  auto wide = plan(TestOp(OpKind::Conv, {{F32, {2, 64, 28, 28}}, {F32, {128, 64, 3, 3}}, {F32, {128}}}, same));
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->name, "cuda_conv2d_f32_3x3_64x64_async_bias");
  EXPECT_EQ(wide->groups, (std::array<uint32_t, 3>{13, 2, 2}));  // ceil(784 / 64) pixel tiles
  const auto w = words(*wide);  // c h w o oh ow cg og groups sh sw ph pw dh dw
  EXPECT_EQ(std::vector<int32_t>(w.begin(), w.end()),
            (std::vector<int32_t>{64, 28, 28, 128, 28, 28, 64, 128, 1, 1, 1, 1, 1, 1, 1}));

  AttrMap dw{{"groups", int64_t(32)}, {"stride", Dims{2, 2}}, {"padding", Dims{1, 1, 1, 1}}};
  auto depthwise = plan(TestOp(OpKind::Conv, {{F32, {1, 32, 56, 56}}, {F32, {32, 1, 3, 3}}}, dw), 90);
  ASSERT_TRUE(depthwise);
  EXPECT_EQ(depthwise->name, "cuda_conv2d_f32_3x3_1x256_async");
  EXPECT_EQ(depthwise->groups, (std::array<uint32_t, 3>{4, 1, 32}));  // 28 * 28 pixels, 32 groups
  EXPECT_EQ(depthwise->args, (std::vector<int>{0, 1, 2}));

  AttrMap grouped{{"groups", int64_t(4)}, {"dilation", Dims{2}}};
  auto conv1d = plan(TestOp(OpKind::Conv, {{F32, {3, 16, 100}}, {F32, {24, 4, 5}}}, grouped), 75);
  ASSERT_TRUE(conv1d);
  EXPECT_EQ(conv1d->name, "cuda_conv2d_f32_1x5_8x128");  // 6 channels per group; no cp.async

  EXPECT_FALSE(plan(TestOp(OpKind::Conv, {{F16, {1, 8, 16, 16}}, {F16, {8, 8, 3, 3}}})));
  // A 3-d conv (the shape rule takes 1-d and 2-d only today; the planner must not assume it).
  TestOp volume(OpKind::Conv, {{F32, {1, 4, 8, 8}}, {F32, {4, 4, 3, 3}}});
  volume.inputs[0].dims.push_back(8);
  volume.inputs[1].dims.push_back(3);
  volume.outputs[0].dims.push_back(6);
  EXPECT_FALSE(plan(volume)) << "3-d conv";
}

TEST(CudaTemplatePlanner, RowKernelsTakeInnermostAxesOnly) {
  auto sm = plan(TestOp(OpKind::Softmax, {{F32, {6, 10, 1000}}}, {{"dim", int64_t(-1)}}));
  ASSERT_TRUE(sm);
  EXPECT_EQ(sm->name, "cuda_rows_softmax_f32_t256");
  EXPECT_EQ(sm->groups, (std::array<uint32_t, 3>{60, 1, 1}));
  EXPECT_EQ(words(*sm)[1], 1000);
  // Trailing size-1 dims do not make a line strided.
  EXPECT_TRUE(plan(TestOp(OpKind::LogSoftmax, {{F32, {8, 64, 1}}}, {{"dim", int64_t(1)}})));
  EXPECT_FALSE(plan(TestOp(OpKind::Softmax, {{F32, {64, 8}}}, {{"dim", int64_t(0)}})));
  EXPECT_FALSE(plan(TestOp(OpKind::Softmax, {{F16, {8, 64}}}, {{"dim", int64_t(1)}})));

  auto mean = plan(TestOp(OpKind::Mean, {{F32, {4, 8, 16}}}, {{"dims", Dims{1, 2}}}));
  ASSERT_TRUE(mean);
  EXPECT_EQ(mean->name, "cuda_rows_mean_f32_t32");
  EXPECT_EQ(words(*mean)[0], 4);
  EXPECT_EQ(words(*mean)[1], 128);
  auto big = plan(TestOp(OpKind::ReduceMax, {{F32, {3, 1, 8192}}}, {{"dims", Dims{-1}}, {"keepdim", true}}));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->name, "cuda_rows_max_f32_t1024");
  EXPECT_TRUE(plan(TestOp(OpKind::Sum, {{F32, {4096}}})));  // all dims: one row
  EXPECT_FALSE(plan(TestOp(OpKind::Sum, {{F32, {64, 64}}}, {{"dims", Dims{0}}}))) << "outer axis";
  EXPECT_FALSE(plan(TestOp(OpKind::ReduceMin, {{F32, {64, 8}}}, {{"dims", Dims{1}}}))) << "short rows";
  EXPECT_FALSE(plan(TestOp(OpKind::Prod, {{F32, {4, 256}}}, {{"dims", Dims{1}}})));

  auto ln = plan(TestOp(OpKind::LayerNorm, {{F32, {2, 5, 64, 12}}, {F32, {64, 12}}, {F32, {64, 12}}},
                        {{"axis", int64_t(-2)}, {"eps", 1e-3}}));
  ASSERT_TRUE(ln);
  EXPECT_EQ(ln->name, "cuda_rows_layer_norm_f32_t256_w_b");
  EXPECT_EQ(ln->args, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(words(*ln)[0], 10);
  EXPECT_EQ(words(*ln)[1], 768);
  EXPECT_FLOAT_EQ(word_f(*ln, 2), 1e-3f);
}

TEST(CudaTemplatePlanner, EntryPointAndBlockSizeComeFromTheSource) {
  std::string name;
  unsigned block = 0;
  ASSERT_TRUE(cuda_entry_point("extern \"C\" __global__ void __launch_bounds__(64) k(float* x) {}", &name, &block));
  EXPECT_EQ(name, "k");
  EXPECT_EQ(block, 64u);
  auto t = plan(TestOp(OpKind::Softmax, {{F32, {4, 100}}}, {{"dim", int64_t(1)}}));
  ASSERT_TRUE(t);
  ASSERT_TRUE(cuda_entry_point(t->source, &name, &block));
  EXPECT_EQ(name, "kiln_rows_f32");
  EXPECT_EQ(block, 32u);
  EXPECT_FALSE(cuda_entry_point("__global__ void __launch_bounds__(UNDEFINED) k() {}", &name, &block));
}

// ---- every variant compiles and assembles ------------------------------------------------------

// One op per variant class the planner distinguishes: matmul tile x transposes x epilogue, wmma
// element type x transposes x epilogue, conv tile x kernel size x bias, every row op x block size.
std::vector<TestOp> variant_ops() {
  std::vector<TestOp> ops;
  for (int64_t size : {256, 2048})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool c : {false, true}) {
          const int64_t k = 256;
          AttrMap attrs{{"trans_a", ta}, {"trans_b", tb}, {"alpha", 1.0}, {"beta", 1.0}};
          std::vector<std::pair<DType, Dims>> ins = {{F32, ta ? Dims{k, size} : Dims{size, k}},
                                                     {F32, tb ? Dims{size, k} : Dims{k, size}}};
          if (c) ins.push_back({F32, {size}});
          ops.emplace_back(OpKind::Gemm, ins, attrs);
          for (DType h : {F16, BF16}) {
            for (auto& in : ins) in.first = h;
            if (size == 256) ops.emplace_back(OpKind::Gemm, ins, attrs);
            for (auto& in : ins) in.first = F32;
          }
        }
  for (int64_t og : {64, 16, 4, 1})
    for (int64_t kernel : {1, 3, 7})
      for (bool bias : {false, true}) {
        const int64_t groups = og == 1 ? 8 : 2;
        std::vector<std::pair<DType, Dims>> ins = {{F32, {1, 8 * groups, 20, 20}},
                                                   {F32, {og * groups, 8, kernel, kernel}}};
        if (og == 1) ins[0].second[1] = groups, ins[1].second[1] = 1;
        if (bias) ins.push_back({F32, {og * groups}});
        ops.emplace_back(OpKind::Conv, ins, AttrMap{{"groups", groups}});
      }
  for (int64_t n : {100, 200, 500, 1000, 2000, 4000}) {  // 32, 64 .. 1024 threads
    ops.emplace_back(OpKind::Softmax, std::vector<std::pair<DType, Dims>>{{F32, {3, n}}}, AttrMap{{"dim", int64_t(1)}});
    ops.emplace_back(OpKind::LogSoftmax, std::vector<std::pair<DType, Dims>>{{F32, {3, n}}},
                     AttrMap{{"dim", int64_t(1)}});
    for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::ReduceMax, OpKind::ReduceMin})
      ops.emplace_back(k, std::vector<std::pair<DType, Dims>>{{F32, {3, n}}}, AttrMap{{"dims", Dims{1}}});
    for (size_t params = 0; params <= 2; ++params) {
      std::vector<std::pair<DType, Dims>> ins = {{F32, {3, n}}};
      for (size_t p = 0; p < params; ++p) ins.push_back({F32, {n}});
      ops.emplace_back(OpKind::LayerNorm, ins, AttrMap{{"axis", int64_t(-1)}});
    }
  }
  return ops;
}

// Many variants in one translation unit (one NVRTC run per architecture instead of hundreds): each
// in its own namespace with its entry renamed, its #defines undone after it, headers hoisted.
struct TemplateBatch {
  std::string includes, body;
  int variants = 0;
  void add(const TemplateLaunch& t) {
    static const std::regex include_line(R"(#include <[^>]+>\n)");
    static const std::regex define_name(R"(#define (\w+))");
    std::string text = t.source;
    for (std::sregex_iterator it(text.begin(), text.end(), include_line), end; it != end; ++it)
      if (includes.find(it->str()) == std::string::npos) includes += it->str();
    text = std::regex_replace(text, include_line, "\n");  // keeps the #line numbering
    std::string entry;
    unsigned block = 0;
    ASSERT_TRUE(cuda_entry_point(text, &entry, &block)) << t.name;
    const std::string renamed = "v" + std::to_string(variants);
    text = std::regex_replace(text, std::regex("\\b" + entry + "\\("), renamed + "(");
    body += "namespace ns_" + renamed + " {\n" + text + "\n}\n";
    std::set<std::string> defined;
    for (std::sregex_iterator it(text.begin(), text.end(), define_name), end; it != end; ++it)
      defined.insert((*it)[1].str());
    for (const std::string& d : defined) body += "#undef " + d + "\n";
    ++variants;
  }
  std::string source() const { return includes + body; }
};

class CudaTemplateCompile : public ::testing::TestWithParam<int> {};

TEST_P(CudaTemplateCompile, EveryVariantCompilesAndAssembles) {
  std::string why;
  if (!Nvrtc::available(&why)) GTEST_SKIP() << why;
  const int sm = GetParam();
  std::map<std::string, TemplateLaunch> variants;  // by source: shapes of one class share it
  for (const TestOp& op : variant_ops())
    if (auto t = plan(op, sm)) variants.emplace(t->source, *t);
  std::set<std::string> names;
  for (const auto& [source, t] : variants) {
    EXPECT_TRUE(names.insert(t.name).second) << "two variants named " << t.name;
    EXPECT_EQ(t.language, "cuda");
  }
  // 16 f32 matmul + (sm_80+) 8 f16 + 8 bf16 wmma + 24 conv + 6 block sizes x (6 ops + 3 layer_norm).
  EXPECT_EQ(variants.size(), size_t(16 + (sm >= 80 ? 16 : 0) + 24 + 54));
  TemplateBatch batch;
  for (const auto& [source, t] : variants) batch.add(t);
  PtxResult ptx;
  const std::string arch = "compute_" + std::to_string(sm);
  ASSERT_NO_THROW(ptx = Nvrtc::get().compile("cuda_templates", batch.source(), arch));
  EXPECT_EQ(ptx.log.find("warning"), std::string::npos) << ptx.log;
  EXPECT_NE(ptx.ptx.find(".entry v0("), std::string::npos);
  EXPECT_EQ(ptx.ptx.find("cp.async") != std::string::npos, sm >= 80);
  EXPECT_EQ(ptx.ptx.find("wmma.mma.sync") != std::string::npos, sm >= 80);
  std::printf("%d template variants -> %zu bytes of PTX for %s\n", batch.variants, ptx.ptx.size(), arch.c_str());
  const std::string ptxas = kiln::testing::find_ptxas();
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not installed: PTX compiled but not assembled";
  std::string messages;
  EXPECT_EQ(kiln::testing::assemble_ptx(ptxas, ptx.ptx, std::to_string(sm),
                                        ::testing::TempDir() + "kiln_templates_sm" + std::to_string(sm), &messages),
            0)
      << messages;
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaTemplateCompile, ::testing::Values(75, 80, 90));

// The batch above renames entries; the backend compiles each variant alone, as planned.
TEST(CudaTemplateCompile, EachTemplateFileCompilesStandalone) {
  std::string why;
  if (!Nvrtc::available(&why)) GTEST_SKIP() << why;
  const std::vector<TestOp> ops = {
      TestOp(OpKind::MatMul, {{F32, {256, 256}}, {F32, {256, 256}}}),
      TestOp(OpKind::MatMul, {{BF16, {256, 256}}, {BF16, {256, 256}}}),
      TestOp(OpKind::Conv, {{F32, {1, 16, 32, 32}}, {F32, {16, 16, 3, 3}}}),
      TestOp(OpKind::LayerNorm, {{F32, {4, 300}}, {F32, {300}}}, {{"axis", int64_t(1)}}),
  };
  for (const TestOp& op : ops) {
    auto t = plan(op, 90);
    ASSERT_TRUE(t);
    PtxResult ptx;
    ASSERT_NO_THROW(ptx = Nvrtc::get().compile(t->name, t->source, "compute_90")) << t->name;
    std::string entry;
    unsigned block = 0;
    ASSERT_TRUE(cuda_entry_point(t->source, &entry, &block));
    EXPECT_NE(ptx.ptx.find(".entry " + entry + "("), std::string::npos) << t->name;
    EXPECT_NE(ptx.ptx.find(".maxntid " + std::to_string(block) + ","), std::string::npos) << t->name;
  }
}

// A template takes an epilogue only where it can: not a step whose result is no float (a
// comparison), nor an operand that runs along a spatial dim rather than the channels.
TEST(CudaTemplatePlanner, EpiloguesDeclineWhatTheStoreCannotTake) {
  const TestOp conv(OpKind::Conv, {{F32, {1, 16, 32, 32}}, {F32, {16, 16, 3, 3}}});
  const AttrMap none;
  auto fused = [&](std::vector<EpilogueStep> steps, std::vector<int64_t> operand_dims) {
    std::vector<BufferView> inputs = conv.inputs;
    if (!operand_dims.empty()) inputs.push_back({nullptr, F32, operand_dims});
    const OpRun run{conv.kind, conv.attrs, inputs, conv.outputs};
    return templates::plan_template_epilogue(run, steps, [](const OpRun& anchor) { return plan_cuda_template(anchor, {}, 90); });
  };
  EXPECT_TRUE(fused({{OpKind::Relu, &none, -1, false}}, {}));
  EXPECT_TRUE(fused({{OpKind::Add, &none, 2, false}}, {16, 1, 1}));
  EXPECT_FALSE(fused({{OpKind::Gt, &none, 2, false}}, {1}));             // a bool result
  EXPECT_FALSE(fused({{OpKind::Add, &none, 2, false}}, {1, 1, 32, 1}));  // along the rows
}

// With an epilogue (template_epilogue.h), each takes its operands as parameters after its output:
// NVRTC compiles the conv and matmul templates with a per-channel scale, a clip, a full-size
// residual and gelu, and the entry point takes them.
TEST(CudaTemplateCompile, TemplatesWithEpiloguesCompile) {
  std::string why;
  if (!Nvrtc::available(&why)) GTEST_SKIP() << why;
  const TestOp conv(OpKind::Conv, {{F32, {1, 16, 32, 32}}, {F32, {16, 16, 3, 3}}});
  const TestOp matmul(OpKind::MatMul, {{F32, {256, 256}}, {F32, {256, 256}}});
  const AttrMap none, clip{{"min", 0.0}, {"max", 6.0}}, gelu{{"approximate", std::string("none")}};
  for (const TestOp* op : {&conv, &matmul}) {
    const std::vector<EpilogueStep> steps = {{OpKind::Mul, &none, 2, false}, {OpKind::Clip, &clip, -1, false},
                                             {OpKind::Add, &none, 3, true}, {OpKind::Gelu, &gelu, -1, false}};
    const std::vector<int64_t>& dims = op->outputs[0].dims;
    std::vector<int64_t> channels(dims.size(), 1);
    channels[op->kind == OpKind::Conv ? 1 : dims.size() - 1] = dims[op->kind == OpKind::Conv ? 1 : dims.size() - 1];
    std::vector<BufferView> inputs = op->inputs;
    inputs.push_back({nullptr, F32, channels});  // per channel (conv) or column (matmul)
    inputs.push_back({nullptr, F32, dims});      // full-size
    const OpRun fused{op->kind, op->attrs, inputs, op->outputs};
    auto t = templates::plan_template_epilogue(fused, steps, [](const OpRun& anchor) { return plan_cuda_template(anchor, {}, 90); });
    ASSERT_TRUE(t) << op_name(op->kind);
    EXPECT_EQ(t->args, (std::vector<int>{0, 1, 4, 2, 3})) << t->name;  // the output, then the operands
    PtxResult ptx;
    ASSERT_NO_THROW(ptx = Nvrtc::get().compile(t->name, t->source, "compute_90")) << t->name;
    EXPECT_EQ(ptx.log.find("warning"), std::string::npos) << ptx.log;
    std::string entry;
    unsigned block = 0;
    ASSERT_TRUE(cuda_entry_point(t->source, &entry, &block));
    EXPECT_NE(ptx.ptx.find(".entry " + entry + "("), std::string::npos) << t->name;
  }
}

// ---- #line: the PTX line table names the user's source -----------------------------------------

TEST(CudaLineInfo, PtxLocationsNameTheFileAndLineAnOpWasRecordedAt) {
  std::string why;
  if (!Nvrtc::available(&why)) GTEST_SKIP() << why;
  // Node %3 (an exp) recorded at /src/model.cpp:41.
  std::vector<TensorType> in = {{F32, {SymInt(64)}}};
  kernel::LoweredOp exp_op = kernel::lower_op(OpKind::Exp, complete_attrs(OpKind::Exp, {}, {}), in, in, /*origin=*/3);
  const kernel::Kernel& k = exp_op.steps.at(0).kernel.kernel;
  kernel::EmitOptions o;
  o.dialect = kernel::Dialect::Cuda;
  o.source_line = [](int id) {
    return id == 3 ? kernel::SourceLine{"/src/model.cpp", 41} : kernel::SourceLine{};
  };
  kernel::EmittedKernel emitted = kernel::emit(k, o);
  EXPECT_NE(emitted.source.find("#line 41 \"/src/model.cpp\""), std::string::npos) << emitted.source;
  // The line table still has one entry per emitted line, directives included.
  EXPECT_EQ(size_t(std::count(emitted.source.begin(), emitted.source.end(), '\n')), emitted.line_origins.size());
  PtxResult ptx;
  ASSERT_NO_THROW(ptx = Nvrtc::get().compile(k.name, emitted.source, "compute_80"));
  // .file N "/src/model.cpp" and at least one `.loc N 41 col` naming it.
  std::smatch file;
  ASSERT_TRUE(std::regex_search(ptx.ptx, file, std::regex(R"(\.file\s+(\d+)\s+"/src/model\.cpp")"))) << ptx.ptx;
  EXPECT_TRUE(std::regex_search(ptx.ptx, std::regex("\\.loc\\s+" + file[1].str() + "\\s+41\\s"))) << ptx.ptx;
  // Without the option there are no directives; with it, dropping the directive lines gives back
  // that text and its line table: directives shift nothing else.
  o.source_line = nullptr;
  const kernel::EmittedKernel plain = kernel::emit(k, o);
  EXPECT_EQ(plain.source.find("#line"), std::string::npos);
  std::string kept;
  std::vector<std::vector<int>> kept_origins;
  size_t start = 0;
  for (size_t i = 0; i < emitted.line_origins.size(); ++i) {
    const size_t end = emitted.source.find('\n', start);
    const std::string text = emitted.source.substr(start, end - start);
    start = end + 1;
    if (text.rfind("#line ", 0) == 0) continue;
    kept += text + "\n";
    kept_origins.push_back(emitted.line_origins[i]);
  }
  EXPECT_EQ(kept, plain.source);
  EXPECT_EQ(kept_origins, plain.line_origins);
}

}  // namespace
}  // namespace kiln::cuda
