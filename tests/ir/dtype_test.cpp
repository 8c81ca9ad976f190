// DType names, promotion and the 16-bit float conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ir/dtype.h"

namespace kiln {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType d : kAllDTypes) {
    DType back;
    ASSERT_TRUE(parse_dtype(dtype_name(d), &back));
    EXPECT_EQ(back, d);
  }
  DType unused;
  EXPECT_FALSE(parse_dtype("f8", &unused));
}

TEST(DType, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(DType::I32, DType::F16), DType::F16);
  EXPECT_EQ(promote_types(DType::F16, DType::BF16), DType::F32);
  EXPECT_EQ(promote_types(DType::I32, DType::I64), DType::I64);
  EXPECT_EQ(promote_types(DType::Bool, DType::U8), DType::U8);
  EXPECT_EQ(promote_types(DType::F32, DType::F64), DType::F64);
  // Integers: the narrowest type that holds both (u8 with i8 is i16, as in PyTorch and NumPy).
  EXPECT_EQ(promote_types(DType::U8, DType::I8), DType::I16);
  EXPECT_EQ(promote_types(DType::I8, DType::I16), DType::I16);
  EXPECT_EQ(promote_types(DType::U16, DType::U32), DType::U32);
  EXPECT_EQ(promote_types(DType::U16, DType::I16), DType::I32);
  EXPECT_EQ(promote_types(DType::U32, DType::I64), DType::I64);
  EXPECT_EQ(promote_types(DType::U64, DType::I8), DType::I64);
  EXPECT_EQ(promote_types(DType::U8, DType::I32), DType::I32);
  EXPECT_EQ(promote_types(DType::Bool, DType::U16), DType::U16);
}

TEST(DType, HalfConvertsExactValuesExactly) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 5.9604645e-08f})
    EXPECT_EQ(float(half(f)), f) << f;
  EXPECT_TRUE(std::isinf(float(half(1e6f))));
  EXPECT_TRUE(std::isnan(float(half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float(half(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
}

TEST(DType, Bfloat16KeepsTheTopBits) {
  EXPECT_EQ(float(bfloat16(1.0f)), 1.0f);
  EXPECT_EQ(float(bfloat16(-3.0f)), -3.0f);
  EXPECT_NEAR(float(bfloat16(3.14159f)), 3.14159f, 0.02f);
}

TEST(DType, ConvertElementsSaturatesAndTruncates) {
  double src[] = {1.9, -1.9, 1e20, std::nan("")};
  int32_t dst[4];
  convert_elements(src, DType::F64, dst, DType::I32, 4);
  EXPECT_EQ(dst[0], 1);
  EXPECT_EQ(dst[1], -1);
  EXPECT_EQ(dst[2], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(dst[3], 0);
}

}  // namespace
}  // namespace kiln
