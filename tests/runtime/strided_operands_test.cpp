// Views as strides (core/ir/strided_view.h), checked against strides derived by hand, and the
// matmul problem a strided operand decodes to (backends/matmul_problem.h): its transposes,
// leading dims and batch strides.
#include <gtest/gtest.h>

#include "backends/matmul_problem.h"
#include "core/ir/strided_view.h"

namespace kiln {
namespace {

using Strides = std::optional<std::vector<int64_t>>;

// The strides of a chain's layout (nothing when it has none).
Strides strides_of(const std::vector<int64_t>& source_dims, const std::vector<ViewStep>& chain) {
  std::optional<StridedLayout> layout = strides_through_views(source_dims, chain);
  if (!layout) return std::nullopt;
  EXPECT_EQ(layout->offset, 0);
  return layout->strides;
}

AttrMap permutation(std::vector<int64_t> dims) {
  AttrMap attrs;
  attrs.set("dims", std::move(dims));
  return attrs;
}

TEST(StridedView, PermuteReordersTheSourceStrides) {
  const AttrMap attrs = permutation({0, 2, 1, 3});
  // [B=2, S=5, H=3, D=4] row-major: strides 60, 12, 4, 1; the head split reads [B, H, S, D].
  EXPECT_EQ(strides_of({2, 5, 3, 4}, {{OpKind::Permute, &attrs, {2, 3, 5, 4}}}),
            Strides(std::vector<int64_t>{60, 4, 12, 1}));
}

TEST(StridedView, ExpandReadsOneElementAlongGrownDims) {
  const AttrMap attrs;
  EXPECT_EQ(strides_of({3, 1}, {{OpKind::Expand, &attrs, {2, 3, 4}}}),
            Strides(std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(strides_of({3, 2}, {{OpKind::Expand, &attrs, {3, 4}}}), std::nullopt);
}

TEST(StridedView, ReshapeSplitsAndMergesDimsThatLieEvenlyApart) {
  const AttrMap attrs;
  const AttrMap transpose = permutation({1, 0});
  // Splitting a row-major [6, 4] into [2, 3, 4], then merging back.
  EXPECT_EQ(strides_of({6, 4}, {{OpKind::Reshape, &attrs, {2, 3, 4}}}),
            Strides(std::vector<int64_t>{12, 4, 1}));
  // A transposed [4, 6] (strides 1, 4) split along its second dim: [4, 2, 3] with strides 1, 12, 4.
  EXPECT_EQ(strides_of({6, 4}, {{OpKind::Permute, &transpose, {4, 6}}, {OpKind::Reshape, &attrs, {4, 2, 3}}}),
            Strides(std::vector<int64_t>{1, 12, 4}));
  // Merging the transposed dims back into one is no stride.
  EXPECT_EQ(strides_of({6, 4}, {{OpKind::Permute, &transpose, {4, 6}}, {OpKind::Reshape, &attrs, {24}}}),
            std::nullopt);
  // Dims of 1 take any place.
  EXPECT_EQ(strides_of({6, 4}, {{OpKind::Reshape, &attrs, {1, 6, 1, 4}}}),
            Strides(std::vector<int64_t>{24, 4, 4, 1}));
}

TEST(StridedView, ASliceStartsAtItsFirstElementAndStepsByItsStep) {
  AttrMap attrs;
  attrs.set("axes", std::vector<int64_t>{1});
  attrs.set("starts", std::vector<SymInt>{SymInt(4)});
  attrs.set("ends", std::vector<SymInt>{SymInt(12)});
  attrs.set("steps", std::vector<int64_t>{2});
  // Columns 4, 6, 8, 10 of a row-major [3, 12]: element (i, j) at 4 + 12 i + 2 j.
  std::optional<StridedLayout> layout = strides_through_views({3, 12}, {{OpKind::Slice, &attrs, {3, 4}}});
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->strides, (std::vector<int64_t>{12, 2}));
  EXPECT_EQ(layout->offset, 4);
  // A start known only at run time is no layout.
  attrs.set("starts", std::vector<SymInt>{SymInt::symbol("t", 4)});
  EXPECT_FALSE(strides_through_views({3, 12}, {{OpKind::Slice, &attrs, {3, 4}}}));
}

TEST(StridedView, OtherViewsAreNoStrides) {
  const AttrMap attrs;
  EXPECT_EQ(strides_of({4, 4}, {{OpKind::Pad, &attrs, {6, 6}}}), std::nullopt);
  EXPECT_FALSE(is_stride_view(OpKind::IndexSelect));
}

// A matmul run at these operand views (no buffers).
std::optional<MatmulProblem> decode(BufferView a, BufferView b, std::vector<int64_t> out) {
  const AttrMap attrs;
  const std::vector<BufferView> ins{std::move(a), std::move(b)};
  const std::vector<BufferView> outs{{nullptr, DType::F32, std::move(out)}};
  return decode_matmul(OpRun{OpKind::MatMul, attrs, ins, outs});
}

TEST(MatmulProblem, RowMajorOperandsHaveTheirWidthAsLeadingDim) {
  std::optional<MatmulProblem> p = decode({nullptr, DType::F32, {4, 8}}, {nullptr, DType::F32, {8, 16}}, {4, 16});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->trans_a || p->trans_b);
  EXPECT_EQ(p->lda, 8);
  EXPECT_EQ(p->ldb, 16);
}

TEST(MatmulProblem, AHeadSplitAndAKeyTransposeDecodeToStridesAndATransposedB) {
  // q [B=2, S=5, H=3, D=4] read as [B, H, S, D]: row stride H*D = 12, batch strides 60 (b), 4 (h).
  // k the same, read as [B, H, D, S]: column stride 12, so B is transposed with ldb 12.
  BufferView q{nullptr, DType::F32, {2, 3, 5, 4}, false, {60, 4, 12, 1}};
  BufferView k{nullptr, DType::F32, {2, 3, 4, 5}, false, {60, 4, 1, 12}};
  std::optional<MatmulProblem> p = decode(q, k, {2, 3, 5, 5});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->trans_a);
  EXPECT_TRUE(p->trans_b);
  EXPECT_EQ(p->lda, 12);
  EXPECT_EQ(p->ldb, 12);
  EXPECT_EQ(p->batch0, 2);
  EXPECT_EQ(p->batch1, 3);
  EXPECT_EQ(p->a_batch0, 60);
  EXPECT_EQ(p->a_batch1, 4);
  EXPECT_EQ(p->b_batch0, 60);
  EXPECT_EQ(p->b_batch1, 4);
  EXPECT_TRUE(matmul_fits_i32(*p));
  const MatmulParams params = matmul_params(*p);
  EXPECT_EQ(params.lda, 12);
  EXPECT_EQ(params.ldb, 12);
}

TEST(MatmulProblem, AViewsFirstElementIsTheOperandsOffset) {
  // k, the second third of a packed [S=5, 3 * 8] projection, read transposed: B is [8, 5] with
  // column stride 24, from element 8.
  BufferView k{nullptr, DType::F32, {8, 5}, false, {1, 24}, 8};
  std::optional<MatmulProblem> p = decode({nullptr, DType::F32, {5, 8}}, k, {5, 5});
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->trans_b);
  EXPECT_EQ(p->ldb, 24);
  EXPECT_EQ(p->a_offset, 0);
  EXPECT_EQ(p->b_offset, 8);
  EXPECT_EQ(matmul_params(*p).b_offset, 8);
  // A negative stride (a reversed view) is no problem.
  EXPECT_FALSE(decode({nullptr, DType::F32, {5, 8}}, {nullptr, DType::F32, {8, 5}, false, {-5, 1}, 35}, {5, 5}));
}

TEST(MatmulProblem, AMatrixWithoutAContiguousDimIsNoProblem) {
  BufferView a{nullptr, DType::F32, {4, 8}, false, {16, 2}};
  EXPECT_FALSE(decode(a, {nullptr, DType::F32, {8, 3}}, {4, 3}));
  // Linear and gemm take row-major operands only.
  const AttrMap attrs;
  const std::vector<BufferView> ins{{nullptr, DType::F32, {4, 8}, false, {1, 4}}, {nullptr, DType::F32, {3, 8}}};
  const std::vector<BufferView> outs{{nullptr, DType::F32, {4, 3}}};
  EXPECT_FALSE(decode_matmul(OpRun{OpKind::Linear, attrs, ins, outs}));
}

}  // namespace
}  // namespace kiln
