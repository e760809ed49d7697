// with_commas for every digit count (a 5-digit number once came out "7,6,800").
#include <gtest/gtest.h>

#include "base/strings.hpp"

namespace cortiq {
namespace {

TEST(WithCommas, EveryDigitCount) {
  EXPECT_EQ(with_commas(0), "0");
  EXPECT_EQ(with_commas(12), "12");
  EXPECT_EQ(with_commas(999), "999");
  EXPECT_EQ(with_commas(1000), "1,000");
  EXPECT_EQ(with_commas(76800), "76,800");
  EXPECT_EQ(with_commas(123456), "123,456");
  EXPECT_EQ(with_commas(1234567), "1,234,567");
  EXPECT_EQ(with_commas(18446744073709551615ull), "18,446,744,073,709,551,615");
}

}  // namespace
}  // namespace cortiq
