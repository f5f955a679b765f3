// The progress display: the bar line, and plain lines when stderr is not a terminal.
#include "bench/progress.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace reprise::bench {
namespace {

TEST(BenchProgressTest, BarLineShowsTheShareDone) {
  EXPECT_EQ(BenchProgress::BarLine("doc", 5, 10, "warm question 2", 12.34, 0),
            "[doc] [##########----------]   5/10    12.3s  warm question 2");
  EXPECT_EQ(BenchProgress::BarLine("doc", 0, 0, "x", 0, 0).substr(0, 29),
            "[doc] [--------------------] ");
  EXPECT_EQ(BenchProgress::BarLine("doc", 12, 10, "x", 0, 0).substr(6, 22),
            "[####################]");
  EXPECT_EQ(BenchProgress::BarLine("doc", 1, 2, "a long step name", 0, 20).size(), 20u);
}

TEST(BenchProgressTest, WritesPlainLinesWhenNotATerminal) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  BenchProgress progress(out, BenchProgress::Mode::kAuto);
  EXPECT_EQ(progress.mode(), BenchProgress::Mode::kLines);
  progress.Begin("chat", 2);
  progress.Step("turn 1");
  progress.Step("turn 2");
  progress.End();
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  EXPECT_NE(text.find("[bench] chat: 2 steps\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[bench] chat 1/2"), std::string::npos) << text;
  EXPECT_NE(text.find("turn 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[bench] chat done"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace reprise::bench
