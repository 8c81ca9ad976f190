// The GLSL emitter: statements carry their origin nodes; the line map matches the source; launch
// sizes respect the 65535-workgroup limit.
#include <gtest/gtest.h>

#include <sstream>

#include "core/kernel/emit.h"
#include "core/kernel/lower.h"
#include "core/support/error.h"

namespace kiln::kernel {
namespace {

LoweredOp lower_add() {
  std::vector<TensorType> in = {{DType::F32, {SymInt(4), SymInt(3)}}, {DType::F32, {SymInt(3)}}};
  std::vector<TensorType> out = infer_types(OpKind::Add, in, {}, {});
  return lower_op(OpKind::Add, complete_attrs(OpKind::Add, {}, {}), in, out, /*origin=*/42);
}

EmitOptions options() {
  EmitOptions o;
  o.describe_origin = [](int id) { return "%" + std::to_string(id) + " add @ model.cpp:7"; };
  return o;
}

TEST(Emit, EveryComputingLineNamesItsOrigin) {
  LoweredOp op = lower_add();
  ASSERT_EQ(op.steps.size(), 1u);
  EmittedKernel k = emit(op.steps[0].kernel.kernel, options());
  std::istringstream lines(k.source);
  std::vector<std::string> text;
  for (std::string l; std::getline(lines, l);) text.push_back(l);
  ASSERT_EQ(text.size(), k.line_origins.size());
  int tagged = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    bool stores = text[i].find("b2[gid] =") != std::string::npos;
    if (stores) {
      EXPECT_EQ(k.line_origins[i], std::vector<int>{42}) << text[i];
      EXPECT_NE(text[i].find("// %42 add @ model.cpp:7"), std::string::npos) << text[i];
    }
    if (!k.line_origins[i].empty()) ++tagged;
  }
  EXPECT_GE(tagged, 2);  // the kernel header and the add itself
}

TEST(Emit, EveryLineOfTheKernelBodyCarriesAnOrigin) {
  // A reduction (loop, accumulator, index math) and a multi-step op (softmax) included.
  std::vector<TensorType> in = {{DType::F32, {SymInt(4), SymInt(6)}}};
  for (OpKind kind : {OpKind::Sum, OpKind::Softmax, OpKind::Relu}) {
    AttrMap attrs = kind == OpKind::Softmax ? AttrMap{{"dim", int64_t(1)}} : AttrMap{};
    auto out = infer_types(kind, in, attrs, {});
    LoweredOp op = lower_op(kind, complete_attrs(kind, attrs, {}), in, out, 9);
    for (const auto& step : op.steps) {
      EmittedKernel k = emit(step.kernel.kernel, options());
      std::istringstream lines(k.source);
      bool in_main = false;
      size_t i = 0;
      for (std::string l; std::getline(lines, l); ++i) {
        if (l == "void main() {") {
          in_main = true;
          continue;
        }
        std::string trimmed = l.substr(l.find_first_not_of(' ') == std::string::npos ? 0 : l.find_first_not_of(' '));
        if (!in_main || trimmed == "}") continue;
        EXPECT_EQ(k.line_origins[i], std::vector<int>{9}) << step.kernel.kernel.name << ": " << l;
      }
      EXPECT_TRUE(in_main);
    }
  }
}

// Texel-buffer reads are a software-device choice: GLSL asks for them explicitly, CUDA never has them.
TEST(Emit, TexelReadsOnlyWhenAskedForInGlsl) {
  const LoweredOp op = lower_add();
  const Kernel& k = op.steps[0].kernel.kernel;
  EmitOptions o = options();
  EXPECT_EQ(emit(k, o).source.find("texelFetch"), std::string::npos);
  o.texel_reads = true;
  const std::string texel = emit(k, o).source;
  EXPECT_NE(texel.find("texelFetch"), std::string::npos) << texel;
  EXPECT_NE(texel.find("samplerBuffer"), std::string::npos) << texel;
  o.dialect = Dialect::Cuda;
  EXPECT_EQ(emit(k, o).source.find("texelFetch"), std::string::npos);
}

// Software devices compute 4 elements per invocation: the same-shape operand is fetched as one
// 4-wide texel, the broadcast one per element, and the result leaves as one vec4 store.
TEST(Emit, Vec4PointwiseOnlyForWordOutputsInGlsl) {
  const LoweredOp op = lower_add();
  const Kernel& k = op.steps[0].kernel.kernel;
  EmitOptions o = options();
  o.texel_reads = o.vec4_pointwise = true;
  const EmittedKernel v = emit(k, o);
  EXPECT_EQ(v.elements_per_invocation, 4);
  EXPECT_NE(v.source.find("rgba32f) uniform readonly imageBuffer b0;"), std::string::npos) << v.source;
  EXPECT_NE(v.source.find("vec4 qb0 = imageLoad(b0, gv);"), std::string::npos) << v.source;
  EXPECT_NE(v.source.find("imageLoad(b1, "), std::string::npos) << v.source;  // the broadcast row
  EXPECT_NE(v.source.find("{ vec4 b2[]; }"), std::string::npos) << v.source;
  EXPECT_NE(v.source.find("b2[gv] = ob2;"), std::string::npos) << v.source;
  EXPECT_EQ(launch_groups(v, 4 * 256 + 1), (std::array<uint32_t, 3>{2, 1, 1}));

  o.vec4_pointwise = false;
  EXPECT_EQ(emit(k, o).elements_per_invocation, 1);
  o.vec4_pointwise = true;
  o.dialect = Dialect::Cuda;
  EXPECT_EQ(emit(k, o).elements_per_invocation, 1);

  // A bool output keeps one element per invocation.
  std::vector<TensorType> in = {{DType::F32, {SymInt(8)}}, {DType::F32, {SymInt(8)}}};
  std::vector<TensorType> out = infer_types(OpKind::Lt, in, {}, {});
  LoweredOp lt = lower_op(OpKind::Lt, complete_attrs(OpKind::Lt, {}, {}), in, out, 1);
  o.dialect = Dialect::Glsl;
  EXPECT_EQ(emit(lt.steps[0].kernel.kernel, o).elements_per_invocation, 1);
}

// A long f32 sum into few outputs is one workgroup per output on GPU dialects: invocations stride
// over the extent and add their partial sums in shared memory. It needs the sizes (static params)
// unless the output is a single element; C++ keeps one loop per output.
TEST(Emit, LongSumsIntoFewOutputsReduceOneWorkgroupPerOutput) {
  auto lower_sum = [](std::vector<int64_t> shape, std::vector<int64_t> dims) {
    std::vector<TensorType> in = {{DType::F32, make_shape(shape)}};
    AttrMap attrs = complete_attrs(OpKind::Sum, {{"dims", dims}, {"keepdim", false}}, {});
    std::vector<TensorType> out = infer_types(OpKind::Sum, in, attrs, {});
    return lower_op(OpKind::Sum, attrs, in, out, 1);
  };
  const LoweredOp rows = lower_sum({3, 2048}, {1});
  ASSERT_EQ(rows.steps.size(), 1u);
  EmitOptions o = options();
  o.static_params = rows.steps[0].kernel.static_param_values();
  const EmittedKernel glsl = emit(rows.steps[0].kernel.kernel, o);
  EXPECT_EQ(glsl.invocations_per_element, 256);
  EXPECT_NE(glsl.source.find("shared float kiln_partial[256];"), std::string::npos) << glsl.source;
  EXPECT_NE(glsl.source.find("r += 256"), std::string::npos) << glsl.source;
  EXPECT_NE(glsl.source.find("barrier();"), std::string::npos) << glsl.source;
  EXPECT_EQ(launch_groups(glsl, 3), (std::array<uint32_t, 3>{3, 1, 1}));

  o.dialect = Dialect::Cuda;
  const EmittedKernel cuda = emit(rows.steps[0].kernel.kernel, o);
  EXPECT_NE(cuda.source.find("__shared__ float kiln_partial[256];"), std::string::npos) << cuda.source;
  EXPECT_NE(cuda.source.find("__syncthreads();"), std::string::npos) << cuda.source;
  o.dialect = Dialect::Cpp;
  EXPECT_EQ(emit(rows.steps[0].kernel.kernel, o).invocations_per_element, 1);

  // Unknown sizes, short rows and many outputs keep one invocation per output.
  o.dialect = Dialect::Glsl;
  o.static_params.clear();
  EXPECT_EQ(emit(rows.steps[0].kernel.kernel, o).invocations_per_element, 1);
  for (const LoweredOp& keep : {lower_sum({3, 500}, {1}), lower_sum({2000, 2048}, {1})}) {
    o.static_params = keep.steps[0].kernel.static_param_values();
    EXPECT_EQ(emit(keep.steps[0].kernel.kernel, o).invocations_per_element, 1);
  }
  // A single output needs no sizes.
  o.static_params.clear();
  const LoweredOp all = lower_sum({10}, {});
  EXPECT_EQ(emit(all.steps.back().kernel.kernel, o).invocations_per_element, 256);
}

// Every Vulkan device takes 128 bytes of push constants: a concat of many inputs of distinct sizes
// becomes a tree of kernels through temps, each within that budget (values: tests/kernel/op_cases).
TEST(Emit, WideConcatStaysWithinPortablePushConstants) {
  std::vector<TensorType> in;
  for (int64_t k = 1; k <= 13; ++k) in.push_back({DType::F32, make_shape({2, k, 3, 2})});
  AttrMap attrs = complete_attrs(OpKind::Concat, {{"dim", int64_t(1)}}, {});
  std::vector<TensorType> out = infer_types(OpKind::Concat, in, attrs, {});
  LoweredOp op = lower_op(OpKind::Concat, attrs, in, out, 1);
  EXPECT_GT(op.steps.size(), 1u);
  EXPECT_FALSE(op.temps.empty());
  for (const LoweredOp::Step& step : op.steps) EXPECT_LE(step.kernel.kernel.num_params * 4, 128);
}

TEST(Emit, KernelTextDoesNotDependOnSizes) {
  auto lower_at = [](int64_t rows) {
    std::vector<TensorType> in = {{DType::F32, {SymInt(rows), SymInt(3)}}, {DType::F32, {SymInt(3)}}};
    auto out = infer_types(OpKind::Add, in, {}, {});
    return lower_op(OpKind::Add, {}, in, out, 1);
  };
  LoweredOp a = lower_at(4), b = lower_at(1000);
  EXPECT_EQ(emit(a.steps[0].kernel.kernel, {}).source, emit(b.steps[0].kernel.kernel, {}).source);
  EXPECT_NE(a.steps[0].kernel.param_values(), b.steps[0].kernel.param_values());
}

TEST(Emit, SymbolicParamsEvaluateFromBindings) {
  SymInt s0 = SymInt::symbol("s0", 8);
  std::vector<TensorType> in = {{DType::F32, {s0, SymInt(3)}}};
  auto out = infer_types(OpKind::Relu, in, {}, {});
  LoweredOp op = lower_op(OpKind::Relu, {}, in, out, 1);
  EXPECT_EQ(op.steps[0].kernel.elements({{"s0", 5}}), 15);
  EXPECT_THROW(op.steps[0].kernel.elements(), Error);
}

TEST(Emit, LaunchGroupsStayWithinLimits) {
  EXPECT_EQ(launch_groups(1, 256), (std::array<uint32_t, 3>{1, 1, 1}));
  EXPECT_EQ(launch_groups(257, 256), (std::array<uint32_t, 3>{2, 1, 1}));
  auto g = launch_groups(int64_t(256) * 70000, 256);
  EXPECT_LE(g[0], 65535u);
  EXPECT_GE(uint64_t(g[0]) * g[1] * 256, uint64_t(256) * 70000);
}

TEST(Emit, CudaDialectPrintsTheSameKernelAsAGlobalFunction) {
  EmitOptions o = options();
  o.dialect = Dialect::Cuda;
  EmittedKernel k = emit(lower_add().steps[0].kernel.kernel, o);
  EXPECT_EQ(k.entry, cuda_entry_name());
  EXPECT_NE(k.source.find("extern \"C\" __global__ void __launch_bounds__(256) kiln_kernel("),
            std::string::npos) << k.source;
  EXPECT_NE(k.source.find("const float* __restrict__ b0"), std::string::npos);
  EXPECT_NE(k.source.find("// %42 add @ model.cpp:7"), std::string::npos);
  EXPECT_EQ(k.source.find("gl_GlobalInvocationID"), std::string::npos);
}

}  // namespace
}  // namespace kiln::kernel
