#include "core/byte_size.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace reprise {
namespace {

TEST(ByteSizeTest, ParsesAndFormats) {
  EXPECT_EQ(ParseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("2gib"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("2G"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("512 MiB"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("64KiB"), 64ull << 10);
  EXPECT_EQ(ParseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(ParseByteSize("1GB"), 1000000000ull);
  EXPECT_EQ(ParseByteSize("500MB"), 500000000ull);
  EXPECT_EQ(ParseByteSize("1000000"), 1000000ull);
  EXPECT_EQ(ParseByteSize("100B"), 100ull);
  for (const char* bad : {"", "GiB", "1..5G", "-1G", "2 XB", "1e3", "abc"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(ParseByteSize(bad), Error);
  }
  EXPECT_EQ(FormatByteSize(2ull << 30), "2.00 GiB");
  EXPECT_EQ(FormatByteSize(100), "100 B");
}

}  // namespace
}  // namespace reprise
