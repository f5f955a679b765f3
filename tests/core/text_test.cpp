#include "core/text.h"

#include <gtest/gtest.h>

namespace reprise {
namespace {

TEST(TextTest, AsciiLowerLeavesOtherBytes) {
  EXPECT_EQ(AsciiLower("GiB 2MB"), "gib 2mb");
  EXPECT_EQ(AsciiLower("\xC3\x89T\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // "ÉTé": only the T
}

TEST(TextTest, TrimAsciiSpaceTrimsBothEnds) {
  EXPECT_EQ(TrimAsciiSpace(" \t\n\v\f\r 2 GiB \r\n"), "2 GiB");
  EXPECT_EQ(TrimAsciiSpace(" \t "), "");
  EXPECT_EQ(TrimAsciiSpace(""), "");
  EXPECT_EQ(TrimAsciiSpace("x"), "x");
}

}  // namespace
}  // namespace reprise
