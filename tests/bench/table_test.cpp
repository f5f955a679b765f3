// BenchTable and BenchCell: aligned text, JSON shape, empty and non-finite cells, row checks.
#include "bench/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bench/report.h"

namespace reprise::bench {
namespace {

TEST(BenchCellTest, PrintsTextNumbersAndEmpty) {
  EXPECT_EQ(BenchCell("q8_0").ToString(), "q8_0");
  EXPECT_EQ(BenchCell(12.345, 2).ToString(), "12.35");
  EXPECT_EQ(BenchCell(12.345).ToString(), "12.3");
  EXPECT_EQ(BenchCell(512).ToString(), "512");
  EXPECT_EQ(BenchCell(size_t{2048}).ToString(), "2048");
  EXPECT_EQ(BenchCell().ToString(), "-");
  EXPECT_EQ(BenchCell(std::numeric_limits<double>::quiet_NaN()).ToString(), "nan");
  EXPECT_TRUE(BenchCell().empty());
  EXPECT_TRUE(BenchCell(1.0).is_number());
  EXPECT_FALSE(BenchCell("x").is_number());
}

TEST(BenchCellTest, JsonKeepsNumbersAndNullsTheRest) {
  EXPECT_EQ(BenchCell(1.5).ToJson(), nlohmann::json(1.5));
  EXPECT_EQ(BenchCell("f16").ToJson(), nlohmann::json("f16"));
  EXPECT_TRUE(BenchCell().ToJson().is_null());
  EXPECT_TRUE(BenchCell(std::numeric_limits<double>::infinity()).ToJson().is_null());
}

TEST(BenchTableTest, TextAlignsColumnsAndRightAlignsNumbers) {
  BenchTable table("prefill", {{"type", ""}, {"speed", "tok/s"}});
  table.AddRow({"q8_0", BenchCell(455.25, 1)});
  table.AddRow({"f16", BenchCell(1234.0, 1)});
  EXPECT_EQ(table.ToText(),
            "prefill\n"
            "  type  speed (tok/s)\n"
            "  -------------------\n"
            "  q8_0          455.2\n"
            "  f16          1234.0\n");
}

TEST(BenchTableTest, JsonHasTitleColumnsAndRows) {
  BenchTable table("t", {{"a", "ms"}, {"b", ""}});
  table.AddRow({1.25, "x"});
  table.AddRow({BenchCell(), 3});
  nlohmann::json json = table.ToJson();
  EXPECT_EQ(json["title"], "t");
  ASSERT_EQ(json["columns"].size(), 2u);
  EXPECT_EQ(json["columns"][0]["name"], "a");
  EXPECT_EQ(json["columns"][0]["unit"], "ms");
  ASSERT_EQ(json["rows"].size(), 2u);
  EXPECT_EQ(json["rows"][0][0], 1.25);
  EXPECT_EQ(json["rows"][0][1], "x");
  EXPECT_TRUE(json["rows"][1][0].is_null());
  EXPECT_EQ(json["rows"][1][1], 3);
}

TEST(BenchTableTest, RowWithTheWrongCellCountIsABug) {
  BenchTable table("t", {{"a", ""}, {"b", ""}});
  EXPECT_THROW(table.AddRow({1}), std::logic_error);
}

TEST(BenchReportTest, FiguresMeetTheirTargets) {
  EXPECT_TRUE(*BenchFigure::AtLeast("p", "prefill", 460, "tok/s", 450).met);
  EXPECT_FALSE(*BenchFigure::AtLeast("p", "prefill", 440, "tok/s", 450).met);
  EXPECT_TRUE(*BenchFigure::AtMost("c", "cost", 0.5, "%", 1).met);
  EXPECT_FALSE(*BenchFigure::AtMost("c", "cost", std::nan(""), "%", 1).met);
  EXPECT_EQ(BenchFigure::AtLeast("p", "prefill", 1, "tok/s", 450).target, ">= 450");
  EXPECT_FALSE(BenchFigure::Plain("x", "x", 1, "").met.has_value());
}

TEST(BenchReportTest, JsonHasOneEntryPerWorkloadWithItsFigures) {
  WorkloadResult result;
  result.name = "doc";
  result.tables.emplace_back("cases", std::vector<BenchColumn>{{"case", ""}, {"TTFT", "ms"}});
  result.tables.back().AddRow({"cold", 120.0});
  result.figures.push_back(
      BenchFigure::AtMost("warm_over_question", "warm / question", 1.05, "x", 1.1));
  result.notes.push_back("how it was measured");
  result.seconds = 2.5;
  nlohmann::json json = ReportJson({{"cpu", "test"}}, {{"threads", 2}}, {result});
  EXPECT_EQ(json["tool"], "reprise bench");
  EXPECT_EQ(json["machine"]["cpu"], "test");
  EXPECT_EQ(json["settings"]["threads"], 2);
  ASSERT_EQ(json["workloads"].size(), 1u);
  const auto& doc = json["workloads"][0];
  EXPECT_EQ(doc["name"], "doc");
  EXPECT_EQ(doc["seconds"], 2.5);
  EXPECT_EQ(doc["tables"][0]["rows"][0][1], 120.0);
  EXPECT_EQ(doc["figures"]["warm_over_question"]["value"], 1.05);
  EXPECT_EQ(doc["figures"]["warm_over_question"]["target"], "<= 1.1");
  EXPECT_EQ(doc["figures"]["warm_over_question"]["met"], true);
  EXPECT_EQ(doc["notes"][0], "how it was measured");

  BenchTable summary = SummaryTable({result, result});
  EXPECT_EQ(summary.rows().size(), 2u);
  EXPECT_NE(WorkloadText(result).find("warm / question"), std::string::npos);
}

// Figures print with more digits as they get small, so a tiny cost does not read as zero.
TEST(BenchReportTest, SmallFiguresKeepTwoSignificantDigits) {
  WorkloadResult result;
  result.name = "unique";
  result.figures = {
      BenchFigure::Plain("a", "large", 1234.4, "ms"), BenchFigure::Plain("b", "middle", 0.36, "%"),
      BenchFigure::Plain("c", "small", 0.0031, "%"), BenchFigure::Plain("d", "zero", 0.0, "%")};
  const std::string text = WorkloadText(result);
  EXPECT_NE(text.find("1234 "), std::string::npos) << text;
  EXPECT_NE(text.find("0.36 "), std::string::npos) << text;
  EXPECT_NE(text.find("0.0031 "), std::string::npos) << text;
  EXPECT_NE(text.find("0.00 "), std::string::npos) << text;
}

}  // namespace
}  // namespace reprise::bench
