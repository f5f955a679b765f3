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

TEST(TextTest, EscapeBytesLetsNoControlOrInvalidByteThrough) {
  EXPECT_EQ(EscapeBytes("plain text, caf\xC3\xA9 \xE2\x82\xAC"),
            "plain text, caf\xC3\xA9 \xE2\x82\xAC");
  EXPECT_EQ(EscapeBytes("a\x1b[2Jb\n\x7f"), "a\\x1B[2Jb\\x0A\\x7F");
  EXPECT_EQ(EscapeBytes("\xC2\x9B"), "\\xC2\\x9B");           // U+009B, the C1 CSI
  EXPECT_EQ(EscapeBytes("\x9b\xff\xC3"), "\\x9B\\xFF\\xC3");  // invalid or cut UTF-8
  EXPECT_EQ(EscapeBytes("\xC0\xAF"), "\\xC0\\xAF");           // overlong '/'
  EXPECT_EQ(EscapeBytes("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(EscapeBytes(std::string(10, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace reprise
