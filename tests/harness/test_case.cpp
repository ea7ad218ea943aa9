#include <gtest/gtest.h>

#include "harness/case.h"
#include "core/error.h"

using namespace kb;

TEST(Case, ParseDtype) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp32"), DType::f32);
  EXPECT_THROW(parse_dtype("int8"), InputError);
}

TEST(Case, ParamsCanonicalString) {
  Params p{{"BN", int64_t(64)}, {"BM", int64_t(32)}};
  EXPECT_EQ(p.str(), "BM=32,BN=64");
  EXPECT_EQ(p.get_int("BM"), 32);
  EXPECT_THROW(p.get_int("BK"), InputError);
}

TEST(Case, CeilDiv) {
  EXPECT_EQ(ceil_div(10, 3), 4);
  EXPECT_EQ(ceil_div(9, 3), 3);
}
