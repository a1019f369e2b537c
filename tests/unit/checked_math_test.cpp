// Checked counting and shapes.
#include <gtest/gtest.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/tensor.hpp"

namespace neuralcost {
namespace {

TEST(CheckedMathTest, MultipliesAndAddsExactlyUpToTheLimit) {
  EXPECT_EQ(checked_mul(UINT64_MAX, 1, "x"), UINT64_MAX);
  EXPECT_EQ(checked_add(UINT64_MAX - 1, 1, "x"), UINT64_MAX);
  EXPECT_EQ(checked_mul(1ULL << 32, 1ULL << 31, "x"), 1ULL << 63);
}

TEST(CheckedMathTest, OverflowThrowsOutOfRangeNamingTheCount) {
  try {
    checked_mul(1ULL << 32, 1ULL << 32, "FLOP count");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_STREQ(e.what(), "FLOP count overflows 64 bits");
  }
  EXPECT_THROW(checked_add(UINT64_MAX, 1, "bytes"), Error);
}

TEST(TensorTest, ElementCountRejectsNegativeDimensions) {
  EXPECT_EQ(element_count({}, "scalar"), 1u);
  EXPECT_EQ(element_count({2, 0, 3}, "empty"), 0u);
  try {
    element_count({2, -3}, "tensor 'x'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tensor 'x': dimension 1 is negative (-3)");
  }
  EXPECT_EQ(shape_string({32, 3, 224}), "32x3x224");
  EXPECT_EQ(TensorDesc({"t", {4, 4}, DType::kBf16}).bytes(), 32u);
}

TEST(TensorTest, ParsesShapesAndNamesBadOnes) {
  EXPECT_EQ(parse_shape("32x3x224x224", "s"), (Shape{32, 3, 224, 224}));
  EXPECT_EQ(parse_shape("7", "s"), (Shape{7}));
  for (const char* bad : {"", "4x", "x4", "4x-2", "4xx2", "4x2.5", "0x3", "99999999999999999999"}) {
    EXPECT_THROW(parse_shape(bad, "--input-shape"), Error) << bad;
  }
}

TEST(DTypeTest, NamesRoundTripAndSizesAreStorageSizes) {
  for (DType d : compute_dtypes()) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_EQ(dtype_bytes(DType::kTf32), 4u);
  EXPECT_EQ(dtype_bytes(DType::kFp8), 1u);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBf16);
  EXPECT_FALSE(parse_dtype("fp4").has_value());
}

}  // namespace
}  // namespace neuralcost
