// Proves each op's kernel lowering computes what the cpu reference computes: one table row per op
// configuration, evaluated on the host with the GLSL printer's semantics (core/kernel/evaluate.h)
// and compared with the eager cpu op. Ops without a lowering yet are skipped with a note.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "core/frontend/dispatch.h"
#include "core/frontend/factories.h"
#include "core/kernel/evaluate.h"
#include "core/support/error.h"
#include "kernel/op_cases.h"

namespace kiln::kernel {
namespace {

using namespace kiln::kernel::testing;

std::string dt(DType t) { return std::string(dtype_name(t)); }

// --- running a case ---------------------------------------------------------------------------

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

class Lowering : public ::testing::TestWithParam<size_t> {};

TEST_P(Lowering, MatchesCpuReference) {
  const Case& c = table()[GetParam()];
  std::mt19937 rng(1234 + unsigned(GetParam()));
  Provenance where;
  AttrMap attrs = complete_attrs(c.kind, c.attrs, where);
  std::vector<TensorType> in_types;
  std::vector<std::vector<uint8_t>> in_data;
  std::vector<Tensor> in_tensors;
  for (const Input& in : c.inputs) {
    in_types.push_back({in.dtype, Shape(in.dims.begin(), in.dims.end())});
    in_data.push_back(make_data(in, rng));
    in_tensors.push_back(from_bytes(in_data.back().data(), in.dtype, Dims(in.dims), Device::cpu()));
  }
  std::vector<TensorType> out_types = infer_types(c.kind, in_types, attrs, where);

  LoweredOp lowered;
  try {
    lowered = lower_op(c.kind, attrs, in_types, out_types, 7);
  } catch (const Error& e) {
    if (std::string(e.what()).find("has no kernel lowering yet") != std::string::npos)
      GTEST_SKIP() << "no lowering yet for '" << op_name(c.kind) << "': " << e.what();
    FAIL() << c.name << ": lower_op threw: " << e.what();
  }
  std::vector<Tensor> want = run_op(c.kind, in_tensors, attrs, Loc::current());
  ASSERT_EQ(want.size(), out_types.size());

  std::vector<HostTensor> ins, outs;
  std::vector<std::vector<uint8_t>> out_data;
  for (size_t i = 0; i < c.inputs.size(); ++i) ins.push_back({c.inputs[i].dtype, c.inputs[i].dims, in_data[i].data()});
  out_data.reserve(out_types.size());
  for (const TensorType& t : out_types) {
    std::vector<int64_t> dims = static_dims(t.shape);
    out_data.emplace_back(size_t(numel_of(dims)) * dtype_size(t.dtype), uint8_t(0xCD));
    outs.push_back({t.dtype, dims, out_data.back().data()});
  }
  try {
    // Constants have no kernels by design: the backend uploads the literal into the output.
    if (c.kind == OpKind::Constant && lowered.steps.empty()) {
      const Literal& lit = attrs.get_tensor("value");
      ASSERT_EQ(lit.bytes.size(), out_data[0].size());
      out_data[0] = lit.bytes;
    } else {
      evaluate(lowered, ins, outs);
    }
  } catch (const Error& e) {
    FAIL() << c.name << ": evaluating the lowering threw: " << e.what();
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    ASSERT_EQ(want[o].dtype(), outs[o].dtype) << c.name << " output " << o;
    ASSERT_EQ(want[o].sizes(), outs[o].dims) << c.name << " output " << o;
    Tolerance tol = c.tol ? *c.tol : default_tolerance(c.kind, outs[o].dtype);
    std::string bad = first_mismatch(out_data[o], bytes_of(want[o]), outs[o].dtype, tol, "lowering");
    EXPECT_EQ(bad, "") << "MISMATCH " << c.name << " (" << op_name(c.kind) << ", output " << o << " "
                       << dt(outs[o].dtype) << dims_str(outs[o].dims) << ", rtol " << tol.rtol
                       << " atol " << tol.atol << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, Lowering, ::testing::Range<size_t>(0, table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return table()[info.param].name; });

// New ops get rows as soon as they enter op_list.def: this fails until they do.
TEST(LoweringTable, CoversEveryOp) {
  std::set<OpKind> covered;
  std::set<std::string> names;
  for (const Case& c : table()) {
    covered.insert(c.kind);
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
  }
  for (size_t i = 0; i < kOpCount; ++i)  // control flow lowers its subgraphs (segmented_program.h)
    if (op_def(OpKind(i)).family != OpFamily::Control)
      EXPECT_TRUE(covered.count(OpKind(i))) << "no lowering_test row for op '" << op_name(OpKind(i)) << "'";
}

// Every kernel names the graph node it computes, so the debugger can map GPU code back to it.
TEST(LoweringProvenance, KernelsCarryTheOrigin) {
  for (const Case& c : table()) {
    Provenance where;
    AttrMap attrs = complete_attrs(c.kind, c.attrs, where);
    std::vector<TensorType> in_types;
    for (const Input& in : c.inputs) in_types.push_back({in.dtype, Shape(in.dims.begin(), in.dims.end())});
    LoweredOp lowered;
    try {
      lowered = lower_op(c.kind, attrs, in_types, infer_types(c.kind, in_types, attrs, where), 42);
    } catch (const Error&) {
      continue;  // no lowering yet: MatchesCpuReference reports it
    }
    for (const LoweredOp::Step& s : lowered.steps) {
      const Kernel& k = s.kernel.kernel;
      for (const Store& st : k.stores)
        EXPECT_EQ(collect_origins(st.value), std::vector<int>{42}) << c.name << ": a store of kernel " << k.name;
      if (k.body) EXPECT_EQ(collect_origins(k.body), std::vector<int>{42}) << c.name << ": body of " << k.name;
    }
  }
}

// Sizes are params: a kernel lowered for a symbolic shape runs at the size its bindings give.
TEST(LoweringParams, SymbolicParamsEvaluateFromBindings) {
  SymInt n = SymInt::symbol("n", 4);
  std::vector<TensorType> ins = {{DType::F32, {n, 3}}, {DType::F32, {3}}};
  LoweredOp op = lower_op(OpKind::Add, {}, ins, {{DType::F32, {n, 3}}}, 1);
  const LoweredKernel& k = op.steps.at(0).kernel;
  std::vector<int32_t> p = k.param_values({{"n", 5}});
  ASSERT_GE(p.size(), 2u);
  EXPECT_EQ(p[0], 5);
  EXPECT_EQ(p[1], 3);
  EXPECT_EQ(k.elements({{"n", 5}}), 15);
  EXPECT_THROW(k.param_values({}), Error);  // an unbound symbol is an error, not a silent 0

  std::vector<float> a(15), b = {10, 20, 30}, out(15, -1);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i);
  evaluate(op, {{DType::F32, {5, 3}, a.data()}, {DType::F32, {3}, b.data()}}, {{DType::F32, {5, 3}, out.data()}},
           {{"n", 5}});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], a[i] + b[i % 3]) << i;

  // A sum over a symbolic dim: the loop extent is a param too.
  LoweredOp sum = lower_op(OpKind::Sum, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}},
                           {{DType::F32, {n, 3}}}, {{DType::F32, {3}}}, 1);
  std::vector<float> s(3, -1);
  evaluate(sum, {{DType::F32, {5, 3}, a.data()}}, {{DType::F32, {3}, s.data()}}, {{"n", 5}});
  EXPECT_EQ(s, (std::vector<float>{30, 35, 40}));
}

// The oracle can fail: the add lowering checked against the sub reference must mismatch.
TEST(Evaluator, ComparisonDetectsAWrongLowering) {
  std::vector<float> a = {1, 2, 3}, b = {0.5f, 0.25f, 4}, got(3);
  std::vector<TensorType> types = {{DType::F32, {3}}, {DType::F32, {3}}};
  LoweredOp add = lower_op(OpKind::Add, {}, types, {{DType::F32, {3}}}, 1);
  evaluate(add, {{DType::F32, {3}, a.data()}, {DType::F32, {3}, b.data()}}, {{DType::F32, {3}, got.data()}});
  Tensor want = run_op1(OpKind::Sub, {from_vector(a), from_vector(b)}, {}, Loc::current());
  std::vector<uint8_t> got_bytes(12);
  std::memcpy(got_bytes.data(), got.data(), 12);
  EXPECT_EQ(first_mismatch(got_bytes, bytes_of(want), DType::F32, {1e-5, 1e-6}, "lowering"),
            "element 0: lowering 1.5, reference 0.5");
}

// The evaluator itself: an out-of-bounds load names the kernel and buffer instead of reading junk.
TEST(Evaluator, OutOfBoundsLoadIsAnError) {
  KernelBuilder b("oob_f32_r1", KernelKind::Pointwise, {SymInt(4)});
  int in = b.add_buffer(DType::F32, false);
  int out = b.add_buffer(DType::F32, true);
  b.kernel().stores.push_back({out, load(in, DType::F32, iadd(linear_index(), constant(1, DType::I32)))});
  LoweredOp op;
  op.steps.push_back({b.finish(), {0, 1}});
  std::vector<float> x(4, 1), y(4);
  try {
    evaluate(op, {{DType::F32, {4}, x.data()}}, {{DType::F32, {4}, y.data()}});
    FAIL() << "expected an out-of-bounds error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("oob_f32_r1"), std::string::npos) << m;
    EXPECT_NE(m.find("input 0"), std::string::npos) << m;
    EXPECT_NE(m.find("offset 4"), std::string::npos) << m;
  }
}

// The evaluator rounds bf16 stores to nearest even and computes f16 in float, like the printer.
TEST(Evaluator, SixteenBitStoresRoundLikeThePrinter) {
  KernelBuilder b("copy_f32_bf16", KernelKind::Pointwise, {SymInt(3)});
  int in = b.add_buffer(DType::F32, false);
  int out = b.add_buffer(DType::BF16, true);
  b.kernel().stores.push_back({out, cast(load(in, DType::F32, linear_index()), DType::BF16)});
  LoweredOp op;
  op.steps.push_back({b.finish(), {0, 1}});
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
  std::vector<float> x = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f};
  std::vector<bfloat16> y(3);
  evaluate(op, {{DType::F32, {3}, x.data()}}, {{DType::BF16, {3}, y.data()}});
  EXPECT_EQ(float(y[0]), 1.0f);
  EXPECT_EQ(float(y[1]), 1.0f + 4.0f / 256);
  EXPECT_EQ(float(y[2]), -2.5f);
}

}  // namespace
}  // namespace kiln::kernel
