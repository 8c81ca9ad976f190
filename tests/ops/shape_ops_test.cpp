// Data-movement ops on the cpu reference backend: hand-derived cases, randomized cases against
// naive index loops written here, every dtype family, errors, and symbolic shapes while tracing.
// Data movement is exact, so every comparison has tolerance 0.
#include <algorithm>
#include <limits>

#include "backends/ref/ref_kernel.h"
#include "core/frontend/dispatch.h"
#include "core/frontend/tracer.h"
#include "ops/op_test_util.h"

namespace kiln {
namespace {

using testing::values;
using Ints = std::vector<int64_t>;

constexpr DType kTestDTypes[] = {DType::F32, DType::I64, DType::Bool, DType::F16};
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

int64_t count(const Ints& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Ints unravel(int64_t i, const Ints& dims) {
  Ints c(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    c[k] = i % dims[k];
    i /= dims[k];
  }
  return c;
}

int64_t ravel(const Ints& c, const Ints& dims) {
  int64_t i = 0;
  for (size_t k = 0; k < dims.size(); ++k) i = i * dims[k] + c[k];
  return i;
}

// Small distinct integers (exact in f16), converted to `dtype`; the oracle reads the converted
// values back, so bool inputs are compared as the 0/1 they became.
Tensor make_input(const Ints& dims, DType dtype, uint64_t seed = 1) {
  std::vector<double> v(size_t(count(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t((i * 37 + seed * 11) % 401) - 200);
  if (dtype == DType::Bool)  // a mix of true and false, not almost all true
    for (double& x : v) x = int64_t(x) % 3 == 0 ? 1 : 0;
  return from_vector(v, dims).to(dtype);
}

// Deterministic pseudo-random integers in [lo, hi].
Ints random_ints(size_t n, uint64_t seed, int64_t lo, int64_t hi) {
  Ints out;
  for (float f : testing::uniform_values(n, seed, 0.0f, 1.0f))
    out.push_back(lo + std::min<int64_t>(hi - lo, int64_t(f * float(hi - lo + 1))));
  return out;
}

// Expects a kiln::Error whose message names the op and holds every fragment.
template <class F>
void expect_error(F f, const std::string& op, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected kiln::Error from op '" << op << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("op '" + op + "'"), std::string::npos) << msg;
    for (const std::string& s : fragments)
      EXPECT_NE(msg.find(s), std::string::npos) << s << " in: " << msg;
  }
}

// ---- reshape, flatten, squeeze, unsqueeze

TEST(Reshape, KeepsRowMajorOrderAndInfersOneDim) {
  Tensor x = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor y = reshape(x, {3, 2});
  EXPECT_EQ(y.sizes(), (Ints{3, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(reshape(x, {-1}).sizes(), (Ints{6}));
  EXPECT_EQ(reshape(x, {1, -1, 2}).sizes(), (Ints{1, 3, 2}));
  EXPECT_EQ(reshape(zeros({0, 3}), {0, 5}).sizes(), (Ints{0, 5}));  // 0 is a literal size
  EXPECT_EQ(reshape(zeros({0, 3}), {-1, 3}).sizes(), (Ints{0, 3}));
  EXPECT_EQ(reshape(full({}, 7.0), {1, 1}).sizes(), (Ints{1, 1}));
}

TEST(Reshape, EveryDTypeKeepsItsValues) {
  for (DType dt : kTestDTypes) {
    Tensor x = make_input({2, 3, 4}, dt);
    Tensor y = reshape(x, {4, -1});
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.sizes(), (Ints{4, 6}));
    EXPECT_EQ(values(y), values(x)) << dtype_name(dt);
  }
}

TEST(Reshape, ErrorsNameOpAndShapes) {
  Tensor x = zeros({2, 3});
  expect_error([&] { reshape(x, {4, 2}); }, "reshape", {"f32[2,3]", "[4,2]", "6 elements"});
  expect_error([&] { reshape(x, {-1, -1}); }, "reshape", {"f32[2,3]", "more than one -1"});
  expect_error([&] { reshape(x, {4, -1}); }, "reshape", {"f32[2,3]", "[4,-1]"});
  expect_error([&] { reshape(x, {-2, 3}); }, "reshape", {"f32[2,3]", "negative size -2"});
  expect_error([&] { reshape(zeros({0, 3}), {0, -1}); }, "reshape", {"f32[0,3]", "ambiguous"});
}

TEST(Reshape, KernelCopiesBytesForGraphExecution) {
  // Eager reshape shares the buffer; graph executors call the kernel, which must copy.
  std::vector<int32_t> in = {1, 2, 3, 4, 5, 6}, out(6, 0);
  AttrMap attrs = complete_attrs(OpKind::Reshape, {{"shape", Ints{3, 2}}}, {});
  reference::KernelContext ctx{OpKind::Reshape, attrs, {{DType::I32, {2, 3}, in.data()}},
                         {{DType::I32, {3, 2}, out.data()}}};
  reference::kernels().get(OpKind::Reshape)(ctx);
  EXPECT_EQ(out, in);
}

TEST(Reshape, FlattenSqueezeUnsqueeze) {
  Tensor x = make_input({2, 1, 3, 1}, DType::F32);
  EXPECT_EQ(flatten(x).sizes(), (Ints{6}));
  EXPECT_EQ(flatten(x, 1).sizes(), (Ints{2, 3}));
  EXPECT_EQ(flatten(x, 1, 2).sizes(), (Ints{2, 3, 1}));
  EXPECT_EQ(flatten(x, -2, -1).sizes(), (Ints{2, 1, 3}));
  EXPECT_EQ(flatten(full({}, 1.0)).sizes(), (Ints{1}));
  EXPECT_EQ(squeeze(x).sizes(), (Ints{2, 3}));
  EXPECT_EQ(squeeze(x, 1).sizes(), (Ints{2, 3, 1}));
  EXPECT_EQ(squeeze(x, -1).sizes(), (Ints{2, 1, 3}));
  EXPECT_EQ(squeeze(x, 0).sizes(), (Ints{2, 1, 3, 1}));  // not size 1: a no-op, as in PyTorch
  EXPECT_EQ(unsqueeze(x, 0).sizes(), (Ints{1, 2, 1, 3, 1}));
  EXPECT_EQ(unsqueeze(x, -1).sizes(), (Ints{2, 1, 3, 1, 1}));
  EXPECT_EQ(unsqueeze(x, 4).sizes(), (Ints{2, 1, 3, 1, 1}));
  EXPECT_EQ(values(squeeze(x)), values(x));
  expect_error([&] { unsqueeze(x, 6); }, "reshape", {"f32[2,1,3,1]", "axis 6"});
  expect_error([&] { flatten(x, 2, 1); }, "reshape", {"f32[2,1,3,1]", "start_dim"});
}

TEST(Reshape, TracedSymbolicBatchInfersStaticRestWithoutGuards) {
  Tracer tracer(Device::cpu());
  TracingScope scope(tracer);
  Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 8), 3, 4}}, "x");
  Tensor y = reshape(x, {x.shape(0), -1});
  EXPECT_EQ(y.type().str(), "f32[s0,12]");
  EXPECT_TRUE(tracer.guards().empty());  // s0 cancels: no shape decision was needed
  EXPECT_EQ(flatten(x, 1).type().str(), "f32[s0,12]");
  EXPECT_EQ(unsqueeze(x, 1).type().str(), "f32[s0,1,3,4]");
  EXPECT_EQ(reshape(x, {-1}).type().str(), "f32[12*s0]");
  EXPECT_EQ(reshape(x, {x.shape(0) * 2, 6}).type().str(), "f32[s0*2,6]");
  expect_error([&] { reshape(x, {x.shape(0), 5}); }, "reshape", {"f32[s0,3,4]", "[s0,5]"});
}

// ---- permute / transpose

std::vector<double> naive_permute(const std::vector<double>& x, const Ints& dims, const Ints& perm) {
  Ints od;
  for (int64_t p : perm) od.push_back(dims[size_t(p)]);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    Ints oc = unravel(i, od), ic(dims.size());
    for (size_t k = 0; k < perm.size(); ++k) ic[size_t(perm[k])] = oc[k];
    out[size_t(i)] = x[size_t(ravel(ic, dims))];
  }
  return out;
}

TEST(Permute, HandTranspose) {
  Tensor x = from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.sizes(), (Ints{3, 2}));
  EXPECT_EQ(values(t), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(values(permute(x, {-1, -2})), values(t));  // negative dims count from the end
  EXPECT_EQ(values(transpose(x, -1, 0)), values(t));
}

TEST(Permute, RandomPermutationsMatchNaiveLoopEveryDType) {
  const Ints dims = {3, 4, 5, 2};
  const std::vector<Ints> perms = {{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 3, 0, 2}, {2, 0, 3, 1}};
  for (DType dt : kTestDTypes) {
    Tensor x = make_input(dims, dt);
    for (const Ints& p : perms) {
      Tensor y = permute(x, p);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(values(y), naive_permute(values(x), dims, p)) << dtype_name(dt);
    }
  }
}

TEST(Permute, LargeTensorUsesParallelPathCorrectly) {
  const Ints dims = {37, 64, 29};
  Tensor x = make_input(dims, DType::F32, 3);
  for (const Ints& p : {Ints{2, 1, 0}, Ints{1, 0, 2}, Ints{0, 2, 1}})
    EXPECT_EQ(values(permute(x, p)), naive_permute(values(x), dims, p));
}

TEST(Permute, BadPermutationsNameOpAndShape) {
  Tensor x = zeros({2, 3, 4});
  expect_error([&] { permute(x, {0, 0, 1}); }, "permute", {"f32[2,3,4]", "[0,0,1]", "not a permutation"});
  expect_error([&] { permute(x, {0, 1}); }, "permute", {"f32[2,3,4]", "[0,1]"});
  expect_error([&] { permute(x, {0, 1, 3}); }, "permute", {"f32[2,3,4]", "[0,1,3]"});
  expect_error([&] { transpose(x, 0, 3); }, "permute", {"f32[2,3,4]", "axis 3"});
}

// ---- slice

// Python's slice.indices(d) as documented, then the range it walks.
std::vector<int64_t> python_slice(int64_t d, int64_t start, int64_t end, int64_t step) {
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? d : d - 1;
  auto norm = [&](int64_t v) {
    if (v == kEnd) return upper;
    if (v == kMin) return lower;
    if (v < 0) v += d;
    return v < lower ? lower : v > upper ? upper : v;
  };
  std::vector<int64_t> idx;
  for (int64_t i = norm(start), e = norm(end); step > 0 ? i < e : i > e; i += step) idx.push_back(i);
  return idx;
}

TEST(Slice, HandCases) {
  Tensor x = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  auto get = [&](int64_t s, int64_t e, int64_t st) {
    return slice(x, 0, s, e, st).to_vector<int64_t>();
  };
  EXPECT_EQ(get(2, 5, 1), (Ints{2, 3, 4}));
  EXPECT_EQ(get(-3, kEnd, 1), (Ints{7, 8, 9}));
  EXPECT_EQ(get(1, 9, 3), (Ints{1, 4, 7}));
  EXPECT_EQ(get(kEnd, kMin, -1), (Ints{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));  // full reversal
  EXPECT_EQ(get(8, 2, -2), (Ints{8, 6, 4}));
  EXPECT_EQ(get(-1, -4, -1), (Ints{9, 8, 7}));
  EXPECT_EQ(get(-100, 100, 4), (Ints{0, 4, 8}));  // clamped
  EXPECT_EQ(get(100, -100, -5), (Ints{9, 4}));
  EXPECT_EQ(get(5, 2, 1), (Ints{}));               // empty
  EXPECT_EQ(get(-100, 0, -1), (Ints{}));           // as numpy: a start before 0 walks nothing
  EXPECT_EQ(get(3, kEnd, kEnd), (Ints{3}));         // a huge step does not overflow
  EXPECT_EQ(get(kEnd, kMin, kMin + 1), (Ints{9}));
  EXPECT_EQ(slice(x, 0, 5, 2).sizes(), (Ints{0}));
}

TEST(Slice, RandomMultiAxisMatchesNaiveLoopEveryDType) {
  const Ints dims = {4, 7, 5};
  const Ints starts = random_ints(60, 11, -9, 9), ends = random_ints(60, 12, -9, 9);
  const Ints steps = random_ints(60, 13, -3, 3);
  for (DType dt : kTestDTypes) {
    Tensor x = make_input(dims, dt, 5);
    const std::vector<double> xv = values(x);
    for (size_t c = 0; c + 3 <= starts.size(); c += 3) {
      Ints st = {starts[c], starts[c + 1], starts[c + 2]}, en = {ends[c], ends[c + 1], ends[c + 2]};
      Ints sp = {steps[c], steps[c + 1], steps[c + 2]};
      for (int64_t& s : sp) s = s == 0 ? 1 : s;
      Ints axes = {2, -3, 1};  // out of order, one negative
      std::vector<std::vector<int64_t>> picks(3);
      for (size_t k = 0; k < 3; ++k) {
        int64_t a = axes[k] < 0 ? axes[k] + 3 : axes[k];
        picks[size_t(a)] = python_slice(dims[size_t(a)], st[k], en[k], sp[k]);
      }
      Tensor y = run_op1(OpKind::Slice, {x},
                         {{"axes", axes}, {"starts", st}, {"ends", en}, {"steps", sp}}, Loc::current());
      Ints od = {int64_t(picks[0].size()), int64_t(picks[1].size()), int64_t(picks[2].size())};
      ASSERT_EQ(y.sizes(), od) << "case " << c;
      std::vector<double> expected;
      for (int64_t i : picks[0])
        for (int64_t j : picks[1])
          for (int64_t k : picks[2]) expected.push_back(xv[size_t(ravel({i, j, k}, dims))]);
      EXPECT_EQ(values(y), expected) << dtype_name(dt) << " case " << c;
    }
  }
}

TEST(Slice, BadArgumentsNameOpAndShape) {
  Tensor x = zeros({4, 5});
  expect_error([&] { slice(x, 0, 0, 4, 0); }, "slice", {"f32[4,5]", "step must not be 0"});
  expect_error([&] { slice(x, 2); }, "slice", {"f32[4,5]", "axis 2"});
  expect_error([&] {
    run_op1(OpKind::Slice, {x}, {{"axes", Ints{0, -2}}, {"starts", Ints{0, 0}}, {"ends", Ints{1, 1}}},
            Loc::current());
  }, "slice", {"f32[4,5]", "more than once"});
  expect_error([&] {
    run_op1(OpKind::Slice, {x}, {{"axes", Ints{0}}, {"starts", Ints{0, 1}}, {"ends", Ints{1}}},
            Loc::current());
  }, "slice", {"f32[4,5]", "same length"});
}

TEST(Slice, TracedSymbolicDim) {
  Tracer tracer(Device::cpu());
  TracingScope scope(tracer);
  Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 8), 6}}, "x");
  EXPECT_EQ(slice(x, 0).type().str(), "f32[s0,6]");
  EXPECT_EQ(slice(x, 1, 1, kEnd, 2).type().str(), "f32[s0,3]");
  EXPECT_TRUE(tracer.guards().empty());
  EXPECT_EQ(slice(x, 0, 0, -1).type().str(), "f32[s0-1,6]");
}

// ---- concat / split

TEST(Concat, HandCases) {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2}), b = from_vector<float>({5, 6}, {2, 1});
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.sizes(), (Ints{2, 3}));
  EXPECT_EQ(values(c), (std::vector<double>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(values(concat({a, a}, -2)), (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(values(concat({a})), values(a));
  EXPECT_EQ(concat({a, zeros({0, 2})}).sizes(), (Ints{2, 2}));
}

TEST(Concat, RandomAlongEachDimMatchesNaiveLoopEveryDType) {
  for (DType dt : kTestDTypes) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<Ints> shapes;
      std::vector<Tensor> parts;
      for (int64_t p = 0; p < 3; ++p) {
        Ints d = {3, 4, 2};
        d[size_t(dim)] = p + 1;
        shapes.push_back(d);
        parts.push_back(make_input(d, dt, uint64_t(p + 7)));
      }
      Tensor y = concat(parts, dim);
      Ints od = {3, 4, 2};
      od[size_t(dim)] = 6;
      ASSERT_EQ(y.sizes(), od);
      std::vector<double> expected(size_t(count(od)));
      for (int64_t i = 0; i < count(od); ++i) {
        Ints c = unravel(i, od);
        size_t p = 0;
        while (c[size_t(dim)] >= shapes[p][size_t(dim)]) c[size_t(dim)] -= shapes[p++][size_t(dim)];
        expected[size_t(i)] = values(parts[p])[size_t(ravel(c, shapes[p]))];
      }
      EXPECT_EQ(values(y), expected) << dtype_name(dt) << " dim " << dim;
    }
  }
}

TEST(Concat, MismatchesNameOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({2, 4}), i = zeros({2, 3}, DType::I32);
  expect_error([&] { concat({a, b}, 0); }, "concat", {"f32[2,3]", "f32[2,4]", "dim 1"});
  expect_error([&] { concat({a, i}, 0); }, "concat", {"f32[2,3]", "i32[2,3]", "dtype"});
  expect_error([&] { concat({a, zeros({2, 3, 1})}, 0); }, "concat", {"f32[2,3,1]", "rank"});
  expect_error([&] { concat({a, a}, 2); }, "concat", {"f32[2,3]", "axis 2"});
  expect_error([&] { concat({}, 0); }, "concat", {"at least 1"});
}

TEST(Split, BySizeAndBySizes) {
  Tensor x = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2});
  std::vector<Tensor> parts = split(x, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].to_vector<int64_t>(), (Ints{0, 1, 2, 3}));
  EXPECT_EQ(parts[2].sizes(), (Ints{1, 2}));  // the last piece is smaller
  EXPECT_EQ(parts[2].to_vector<int64_t>(), (Ints{8, 9}));
  std::vector<Tensor> cols = split(x, Ints{1, 1}, -1);
  EXPECT_EQ(cols[1].to_vector<int64_t>(), (Ints{1, 3, 5, 7, 9}));
  std::vector<Tensor> uneven = split(x, Ints{0, 4, 1}, 0);
  EXPECT_EQ(uneven[0].sizes(), (Ints{0, 2}));
  EXPECT_EQ(uneven[2].to_vector<int64_t>(), (Ints{8, 9}));
}

TEST(Split, RandomSplitThenConcatRoundTripsEveryDType) {
  for (DType dt : kTestDTypes) {
    Tensor x = make_input({4, 9, 3}, dt, 9);
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<Tensor> parts = split(x, 2, dim);
      EXPECT_EQ(int64_t(parts.size()), (x.sizes()[size_t(dim)] + 1) / 2);
      EXPECT_EQ(values(concat(parts, dim)), values(x)) << dtype_name(dt) << " dim " << dim;
      // Each piece against a naive slice of the input.
      int64_t offset = 0;
      for (const Tensor& p : parts) {
        std::vector<double> expected;
        Ints pd = p.sizes();
        for (int64_t i = 0; i < count(pd); ++i) {
          Ints c = unravel(i, pd);
          c[size_t(dim)] += offset;
          expected.push_back(values(x)[size_t(ravel(c, x.sizes()))]);
        }
        EXPECT_EQ(values(p), expected);
        offset += pd[size_t(dim)];
      }
    }
  }
}

TEST(Split, BadSizesNameOpAndShape) {
  Tensor x = zeros({5, 2});
  expect_error([&] { split(x, Ints{2, 2}); }, "split", {"f32[5,2]", "sum to 4", "size 5"});
  expect_error([&] { split(x, Ints{6, -1}); }, "split", {"f32[5,2]", "negative"});
  expect_error([&] { split(x, 0); }, "split", {"f32[5,2]", "positive"});
}

// ---- gather / index_select / embedding

TEST(Gather, HandCaseFromTorchDocs) {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor index = from_vector<int64_t>({0, 0, 1, 0}, {2, 2});
  EXPECT_EQ(values(gather(x, 1, index)), (std::vector<double>{1, 1, 4, 3}));
  EXPECT_EQ(values(gather(x, 0, index)), (std::vector<double>{1, 2, 3, 2}));
  Tensor neg = from_vector<int32_t>({-1, -2}, {2, 1});  // i32, negative counts from the end
  EXPECT_EQ(values(gather(x, -1, neg)), (std::vector<double>{2, 3}));
}

TEST(Gather, RandomIndicesMatchNaiveLoopEveryDType) {
  const Ints xd = {4, 5, 3};
  for (DType dt : kTestDTypes) {
    Tensor x = make_input(xd, dt, 2);
    const std::vector<double> xv = values(x);
    for (int64_t dim = 0; dim < 3; ++dim) {
      Ints id = {3, 4, 2};  // no larger than x in the other dims
      id[size_t(dim)] = 6;  // and free along dim
      const int64_t size = xd[size_t(dim)];
      Ints idx = random_ints(size_t(count(id)), uint64_t(dim + 20), -size, size - 1);
      for (DType it : {DType::I64, DType::I32}) {
        Tensor index = from_vector(idx, id).to(it);
        Tensor y = gather(x, dim, index);
        ASSERT_EQ(y.sizes(), id);
        std::vector<double> expected;
        for (int64_t i = 0; i < count(id); ++i) {
          Ints c = unravel(i, id);
          int64_t v = idx[size_t(i)];
          c[size_t(dim)] = v < 0 ? v + size : v;
          expected.push_back(xv[size_t(ravel(c, xd))]);
        }
        EXPECT_EQ(values(y), expected) << dtype_name(dt) << " dim " << dim;
      }
    }
  }
}

TEST(Gather, OutOfRangeIndexIsNamedAfterTheParallelLoop) {
  Tensor x = make_input({200, 300}, DType::F32);
  Ints idx(200 * 300, 1);
  idx[123456 % idx.size()] = 300;  // one bad value deep inside a large index
  Tensor index = from_vector(idx, {200, 300});
  expect_error([&] { gather(x, 1, index); }, "gather",
               {"f32[200,300]", "i64[200,300]", "index 300", "size 300"});
  expect_error([&] { gather(x, 0, from_vector<int64_t>({-201}, {1, 1})); }, "gather", {"index -201"});
}

TEST(Gather, BadIndexTypesNameOpAndShapes) {
  Tensor x = zeros({2, 3});
  expect_error([&] { gather(x, 0, zeros({2, 3})); }, "gather", {"f32[2,3]", "i32 or i64"});
  expect_error([&] { gather(x, 0, zeros({2}, DType::I64)); }, "gather", {"i64[2]", "same rank"});
  expect_error([&] { gather(x, 0, zeros({2, 4}, DType::I64)); }, "gather", {"i64[2,4]", "dim 1"});
}

TEST(IndexSelect, HandCasesAndEmbedding) {
  Tensor x = from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor rows = index_select(x, 0, from_vector<int64_t>({2, 0, -1}, {3}));
  EXPECT_EQ(values(rows), (std::vector<double>{4, 5, 0, 1, 4, 5}));
  Tensor cols = index_select(x, 1, from_vector<int32_t>({1, 1, 0, 1}, {2, 2}));
  EXPECT_EQ(cols.sizes(), (Ints{3, 2, 2}));
  EXPECT_EQ(values(cols), (std::vector<double>{1, 1, 0, 1, 3, 3, 2, 3, 5, 5, 4, 5}));
  Tensor e = embedding(from_vector<int64_t>({1, 2, 1, 0}, {2, 2}), x);
  EXPECT_EQ(e.sizes(), (Ints{2, 2, 2}));
  EXPECT_EQ(values(e), (std::vector<double>{2, 3, 4, 5, 2, 3, 0, 1}));
  EXPECT_EQ(index_select(x, 0, from_vector<int64_t>({}, {0})).sizes(), (Ints{0, 2}));
}

TEST(IndexSelect, RandomIndicesMatchNaiveLoopEveryDType) {
  const Ints xd = {3, 6, 4};
  for (DType dt : kTestDTypes) {
    Tensor x = make_input(xd, dt, 4);
    const std::vector<double> xv = values(x);
    for (int64_t dim = 0; dim < 3; ++dim) {
      const int64_t size = xd[size_t(dim)];
      const Ints id = {2, 5};
      Ints idx = random_ints(10, uint64_t(dim + 40), -size, size - 1);
      Tensor y = index_select(x, dim - 3, from_vector(idx, id));  // negative dim
      Ints od(xd.begin(), xd.begin() + dim);
      od.insert(od.end(), id.begin(), id.end());
      od.insert(od.end(), xd.begin() + dim + 1, xd.end());
      ASSERT_EQ(y.sizes(), od);
      std::vector<double> expected;
      for (int64_t i = 0; i < count(od); ++i) {
        Ints c = unravel(i, od), xc(c.begin(), c.begin() + dim);
        int64_t v = idx[size_t(c[size_t(dim)] * 5 + c[size_t(dim) + 1])];
        xc.push_back(v < 0 ? v + size : v);
        xc.insert(xc.end(), c.begin() + dim + 2, c.end());
        expected.push_back(xv[size_t(ravel(xc, xd))]);
      }
      EXPECT_EQ(values(y), expected) << dtype_name(dt) << " dim " << dim;
    }
  }
}

TEST(IndexSelect, ErrorsNameOpAndShapes) {
  Tensor x = zeros({3, 2});
  expect_error([&] { index_select(x, 0, from_vector<int64_t>({0, 3}, {2})); }, "index_select",
               {"f32[3,2]", "i64[2]", "index 3", "size 3"});
  expect_error([&] { index_select(x, 0, zeros({2})); }, "index_select", {"f32[2]", "i32 or i64"});
  expect_error([&] { index_select(x, 2, zeros({2}, DType::I64)); }, "index_select", {"f32[3,2]", "axis 2"});
  expect_error([&] { embedding(from_vector<int64_t>({5}, {1}), x); }, "index_select", {"index 5"});
}

// ---- expand / tile

TEST(Expand, HandCases) {
  Tensor x = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor y = expand(x, {2, 3, 4});
  EXPECT_EQ(y.sizes(), (Ints{2, 3, 4}));
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r)
    for (double v : {1, 2, 3})
      for (int k = 0; k < 4; ++k) expected.push_back(v);
  EXPECT_EQ(values(y), expected);
  EXPECT_EQ(expand(x, {-1, 2}).sizes(), (Ints{3, 2}));  // -1 keeps the dim
  EXPECT_EQ(expand(x, {3, 0}).sizes(), (Ints{3, 0}));
  EXPECT_EQ(values(expand(full({}, 5.0), {2, 2})), (std::vector<double>{5, 5, 5, 5}));
}

TEST(Expand, RandomBroadcastsMatchNaiveLoopEveryDType) {
  const std::vector<std::pair<Ints, Ints>> cases = {
      {{1, 4, 1}, {3, 4, 5}}, {{4, 1}, {2, 3, 4, 6}}, {{1}, {7}}, {{2, 1, 3}, {5, 2, 4, 3}}};
  for (DType dt : kTestDTypes) {
    for (const auto& [xd, od] : cases) {
      Tensor x = make_input(xd, dt, 6);
      const std::vector<double> xv = values(x);
      Tensor y = expand(x, od);
      ASSERT_EQ(y.sizes(), od);
      std::vector<double> expected;
      const size_t lead = od.size() - xd.size();
      for (int64_t i = 0; i < count(od); ++i) {
        Ints c = unravel(i, od), xc;
        for (size_t k = 0; k < xd.size(); ++k) xc.push_back(xd[k] == 1 ? 0 : c[lead + k]);
        expected.push_back(xv[size_t(ravel(xc, xd))]);
      }
      EXPECT_EQ(values(y), expected) << dtype_name(dt);
    }
  }
}

TEST(Expand, IncompatibleShapesNameOpAndShapes) {
  Tensor x = zeros({2, 3});
  expect_error([&] { expand(x, {4, 3, 2}); }, "expand", {"f32[2,3]", "[4,3,2]", "does not broadcast"});
  expect_error([&] { expand(x, {-1, 2, 3}); }, "expand", {"f32[2,3]", "-1"});
}

TEST(Tile, HandCasesWithTorchRepeatRules) {
  Tensor x = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(tile(x, {1, 2}).to_vector<int64_t>(), (Ints{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(tile(x, {2, 1}).to_vector<int64_t>(), (Ints{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(tile(x, {3}).sizes(), (Ints{2, 6}));        // fewer repeats: trailing dims
  EXPECT_EQ(tile(x, {2, 1, 1}).sizes(), (Ints{2, 2, 2}));  // more repeats: new leading dims
  EXPECT_EQ(tile(x, {0, 1}).sizes(), (Ints{0, 2}));
  expect_error([&] { run_op1(OpKind::Tile, {x}, {{"repeats", Ints{2}}}, Loc::current()); }, "tile",
               {"i64[2,2]", "one count per dim"});
  expect_error([&] { tile(x, {-1, 1}); }, "tile", {"i64[2,2]", "negative"});
}

TEST(Tile, RandomRepeatsMatchNaiveLoopEveryDType) {
  const Ints xd = {2, 3, 4};
  for (DType dt : kTestDTypes) {
    Tensor x = make_input(xd, dt, 8);
    const std::vector<double> xv = values(x);
    for (const Ints& reps : {Ints{1, 1, 1}, Ints{2, 1, 3}, Ints{3, 2, 1}, Ints{1, 4, 2}}) {
      Tensor y = tile(x, reps);
      Ints od = {xd[0] * reps[0], xd[1] * reps[1], xd[2] * reps[2]};
      ASSERT_EQ(y.sizes(), od);
      std::vector<double> expected;
      for (int64_t i = 0; i < count(od); ++i) {
        Ints c = unravel(i, od);
        for (size_t k = 0; k < 3; ++k) c[k] %= xd[k];
        expected.push_back(xv[size_t(ravel(c, xd))]);
      }
      EXPECT_EQ(values(y), expected) << dtype_name(dt);
    }
  }
}

TEST(Expand, TracedSymbolicShapesFlowThroughConcatExpandPadTile) {
  Tracer tracer(Device::cpu());
  TracingScope scope(tracer);
  Tensor x = tracer.input({DType::F32, {SymInt::symbol("s0", 8), 1}}, "x");
  EXPECT_EQ(expand(x, {-1, 4}).type().str(), "f32[s0,4]");
  EXPECT_EQ(expand(x, {2, x.shape(0), 3}).type().str(), "f32[2,s0,3]");
  EXPECT_EQ(concat({x, x}, 1).type().str(), "f32[s0,2]");
  EXPECT_EQ(concat({x, x}, 0).type().str(), "f32[s0+s0,1]");
  EXPECT_EQ(permute(x, {1, 0}).type().str(), "f32[1,s0]");
  EXPECT_EQ(pad(x, {0, 0, 1, 2}).type().str(), "f32[s0+1+2,1]");
  EXPECT_EQ(tile(x, {2, 3}).type().str(), "f32[s0*2,3]");
  EXPECT_EQ(index_select(x, 1, zeros({5}, DType::I64)).type().str(), "f32[s0,5]");
  EXPECT_TRUE(tracer.guards().empty());  // none of these needed a decision on s0
}

// ---- pad

TEST(Pad, HandCasesInTorchOrder) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // (1, 2) pads the last dim; (1, 0) pads dim 0 before.
  Tensor c = pad(x, {1, 2, 1, 0}, "constant", 9);
  EXPECT_EQ(c.sizes(), (Ints{3, 6}));
  EXPECT_EQ(values(c), (std::vector<double>{9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9}));
  EXPECT_EQ(values(pad(x, {2, 2}, "reflect")),
            (std::vector<double>{3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4}));
  EXPECT_EQ(values(pad(x, {1, 2}, "replicate")),
            (std::vector<double>{1, 1, 2, 3, 3, 3, 4, 4, 5, 6, 6, 6}));
  EXPECT_EQ(values(pad(x, {0, 0, 1, 1}, "edge")),
            (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(values(pad(x, {-1, 1})), (std::vector<double>{2, 3, 0, 5, 6, 0}));  // negative crops
  EXPECT_EQ(values(pad(x, {})), values(x));
  EXPECT_EQ(pad(x, {1, 1}, "constant", 2.5).to_vector<float>()[0], 2.5f);
  EXPECT_EQ(pad(from_vector<int32_t>({1}, {1}), {1, 0}, "constant", 7).to_vector<int32_t>(),
            (std::vector<int32_t>{7, 1}));
}

// The input position an output position reads, by walking the padding rule one step at a time.
int64_t pad_source(int64_t o, int64_t begin, int64_t d, const std::string& mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < d) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : d - 1;
  while (i < 0 || i >= d) i = i < 0 ? -i : 2 * (d - 1) - i;  // mirror about the end elements
  return i;
}

TEST(Pad, RandomPadsMatchNaiveLoopEveryModeAndDType) {
  const Ints xd = {3, 4, 5};
  const std::vector<Ints> onnx_pads = {
      {1, 0, 2, 0, 3, 1}, {0, 2, 0, 1, 0, 4}, {-1, 1, 2, 2, -1, 3}, {2, -2, -1, 0, 1, -2}};
  for (DType dt : kTestDTypes) {
    Tensor x = make_input(xd, dt, 12);
    const std::vector<double> xv = values(x);
    for (const std::string mode : {"constant", "reflect", "edge"}) {
      for (const Ints& p : onnx_pads) {
        Tensor y = run_op1(OpKind::Pad, {x}, {{"pads", p}, {"mode", mode}, {"value", 1.0}},
                           Loc::current());
        Ints od;
        for (size_t k = 0; k < 3; ++k) od.push_back(xd[k] + p[k] + p[k + 3]);
        ASSERT_EQ(y.sizes(), od);
        std::vector<double> expected;
        for (int64_t i = 0; i < count(od); ++i) {
          Ints c = unravel(i, od), xc;
          for (size_t k = 0; k < 3; ++k) xc.push_back(pad_source(c[k], p[k], xd[k], mode));
          bool fill = std::find(xc.begin(), xc.end(), -1) != xc.end();
          expected.push_back(fill ? 1.0 : xv[size_t(ravel(xc, xd))]);
        }
        EXPECT_EQ(values(y), expected) << dtype_name(dt) << " " << mode;
      }
    }
  }
}

TEST(Pad, ErrorsNameOpAndShape) {
  Tensor x = zeros({2, 3});
  expect_error([&] { pad(x, {3, 0}, "reflect"); }, "pad", {"f32[2,3]", "reflect padding", "size 3"});
  expect_error([&] { pad(x, {0, 0, 0, 2}, "reflect"); }, "pad", {"f32[2,3]", "dim 0 of size 2"});
  expect_error([&] { pad(x, {1, 1}, "circular"); }, "pad", {"f32[2,3]", "circular"});
  expect_error([&] { pad(x, {1}); }, "pad", {"f32[2,3]", "pairs"});
  expect_error([&] { pad(x, {-2, -2}); }, "pad", {"f32[2,3]", "negative size"});
  expect_error([&] { pad(zeros({0, 2}), {0, 0, 1, 0}, "edge"); }, "pad", {"f32[0,2]", "non-empty"});
}

}  // namespace
}  // namespace kiln
