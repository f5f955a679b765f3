// Benchmark texts: the seed's table, grown rows, questions, prose and fitting to a token count.
#include "bench/texts.h"

#include <gtest/gtest.h>

#include <set>

namespace reprise::bench {
namespace {

TEST(BenchTextsTest, TableStartsWithTheSeedsRows) {
  EXPECT_EQ(SeedTableRows(), 30);
  EXPECT_EQ(TableRow(1),
            "| 1 | John Doe | 29 | Engineer | USA | john.doe@example.com | 555-1234 | 123 Elm St, "
            "Springfield, IL |\n");
  EXPECT_EQ(TableRow(28).substr(0, 16), "| 28 | Zack Blue");
  std::string document = TableDocument(3);
  EXPECT_EQ(document.rfind(TablePreamble(), 0), 0u);
  EXPECT_EQ(document, TablePreamble() + TableRow(1) + TableRow(2) + TableRow(3));
}

TEST(BenchTextsTest, GrownRowsHaveTheSameFormAndDiffer) {
  std::set<std::string> rows;
  for (int id = 31; id <= 300; ++id) {
    std::string row = TableRow(id);
    EXPECT_EQ(row.rfind("| " + std::to_string(id) + " | ", 0), 0u) << row;
    EXPECT_EQ(std::count(row.begin(), row.end(), '|'), 9) << row;
    EXPECT_EQ(row.back(), '\n');
    rows.insert(row.substr(row.find('|', 2)));  // without the id
  }
  EXPECT_EQ(rows.size(), 270u);
  EXPECT_EQ(TableRow(77), TableRow(77));
}

TEST(BenchTextsTest, QuestionsFollowTheSeedAndDifferByKind) {
  EXPECT_EQ(TableQuestion(28, 0),
            "Question: what is the age of Zack Blue? Your answer: The age of Zack Blue is ");
  std::set<std::string> questions;
  for (int kind = 0; kind < 5; ++kind) questions.insert(TableQuestion(40 + kind, kind));
  EXPECT_EQ(questions.size(), 5u);
}

TEST(BenchTextsTest, ProseIsSeededAndDiffersFromTheFirstWord) {
  EXPECT_EQ(Prose(3, 50), Prose(3, 50));
  EXPECT_NE(Prose(3, 50), Prose(4, 50));
  EXPECT_EQ(Prose(3, 80).rfind(Prose(3, 50), 0), 0u);  // more words extend the same text
  EXPECT_NE(Prose(3, 5).substr(0, 7), Prose(4, 5).substr(0, 7));
}

TEST(BenchTextsTest, FitToTokensFindsTheLargestTextWithinTheTarget) {
  auto count = [](const std::string& text) { return text.size(); };  // a byte "tokenizer"
  auto make = [](size_t units) { return std::string(units * 3, 'x'); };
  FittedText fitted = FitToTokens(make, 100, count, 1000);
  EXPECT_EQ(fitted.units, 33u);
  EXPECT_EQ(fitted.tokens, 99u);
  EXPECT_EQ(fitted.text.size(), 99u);
  fitted = FitToTokens(make, 100, count, 10);  // the cap fits
  EXPECT_EQ(fitted.units, 10u);
  fitted = FitToTokens(make, 2, count, 10);  // nothing fits: the smallest
  EXPECT_EQ(fitted.units, 1u);
  EXPECT_EQ(fitted.tokens, 3u);
}

}  // namespace
}  // namespace reprise::bench
