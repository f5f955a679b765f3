// Prometheus text: names, types, labels, histogram buckets.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace reprise::server {
namespace {

// The value of the sample line that starts with `prefix` (name and labels), or -1.
double Sample(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix + " ", 0) == 0) return std::stod(line.substr(prefix.size() + 1));
  }
  return -1;
}

TEST(HistogramTest, CumulativeBuckets) {
  Histogram histogram({0.1, 1.0, 10.0});
  histogram.Observe(0.05);
  histogram.Observe(0.5);
  histogram.Observe(0.5);
  histogram.Observe(100);
  EXPECT_EQ(histogram.counts(), (std::vector<uint64_t>{1, 3, 3}));
  EXPECT_EQ(histogram.count(), 4u);
  EXPECT_DOUBLE_EQ(histogram.sum(), 101.05);
}

TEST(MetricsTest, RendersEngineStatsAndServerCounters) {
  EngineStats stats;
  stats.prefix_cache_queries = 1000;
  stats.prefix_cache_hits = 640;
  stats.prompt_tokens_total = 1000;
  stats.generation_tokens_total = 30;
  stats.blocks_total = 100;
  stats.blocks_in_use = 10;
  stats.blocks_cached = 40;
  stats.blocks_free = 45;
  stats.blocks_pinned = 5;
  stats.blocks_protected = 30;
  stats.requests_running = 2;
  stats.requests_waiting = 3;
  stats.preemptions = 1;
  stats.scheduling_seconds_total = 0.25;
  stats.forward_seconds_total = 12.5;
  ServerMetrics metrics;
  metrics.RecordFinished(FinishReason::kStop, 0.02, 0.5);
  metrics.RecordFinished(FinishReason::kLength, 0.3, 2.0);
  metrics.RecordFinished(FinishReason::kLength, 0.3, 2.0);
  metrics.RecordError(404);
  std::string text = metrics.Render(stats, {}, "tiny\"model");
  const std::string label = "{model_name=\"tiny\\\"model\"";

  EXPECT_NE(text.find("# TYPE reprise:prefix_cache_queries_total counter"), std::string::npos);
  EXPECT_EQ(Sample(text, "reprise:prefix_cache_queries_total" + label + "}"), 1000);
  EXPECT_EQ(Sample(text, "reprise:prefix_cache_hits_total" + label + "}"), 640);
  EXPECT_EQ(Sample(text, "reprise:prompt_tokens_total" + label + "}"), 1000);
  EXPECT_EQ(Sample(text, "reprise:generation_tokens_total" + label + "}"), 30);
  EXPECT_EQ(Sample(text, "reprise:num_requests_running" + label + "}"), 2);
  EXPECT_EQ(Sample(text, "reprise:num_requests_waiting" + label + "}"), 3);
  EXPECT_EQ(Sample(text, "reprise:num_preemptions_total" + label + "}"), 1);
  EXPECT_DOUBLE_EQ(Sample(text, "reprise:scheduling_seconds_total" + label + "}"), 0.25);
  EXPECT_DOUBLE_EQ(Sample(text, "reprise:forward_seconds_total" + label + "}"), 12.5);
  EXPECT_EQ(Sample(text, "reprise:kv_cache_blocks_in_use" + label + "}"), 10);
  EXPECT_EQ(Sample(text, "reprise:kv_cache_blocks_cached" + label + "}"), 40);
  EXPECT_EQ(Sample(text, "reprise:kv_cache_blocks_free" + label + "}"), 45);
  EXPECT_EQ(Sample(text, "reprise:kv_cache_blocks_total" + label + "}"), 100);
  EXPECT_EQ(Sample(text, "reprise:kv_cache_blocks_pinned" + label + "}"), 5);
  EXPECT_EQ(Sample(text, "reprise:kv_cache_blocks_protected" + label + "}"), 30);
  EXPECT_DOUBLE_EQ(Sample(text, "reprise:kv_cache_usage_perc" + label + "}"), 0.15);
  EXPECT_EQ(Sample(text, "reprise:request_success_total" + label + ",finished_reason=\"stop\"}"),
            1);
  EXPECT_EQ(Sample(text, "reprise:request_success_total" + label + ",finished_reason=\"length\"}"),
            2);
  EXPECT_EQ(Sample(text, "reprise:http_errors_total" + label + ",status=\"404\"}"), 1);
  EXPECT_NE(text.find("# TYPE reprise:time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_EQ(Sample(text, "reprise:time_to_first_token_seconds_bucket" + label + ",le=\"0.02\"}"),
            1);
  EXPECT_EQ(Sample(text, "reprise:time_to_first_token_seconds_bucket" + label + ",le=\"0.5\"}"), 3);
  EXPECT_EQ(Sample(text, "reprise:time_to_first_token_seconds_bucket" + label + ",le=\"+Inf\"}"),
            3);
  EXPECT_EQ(Sample(text, "reprise:time_to_first_token_seconds_count" + label + "}"), 3);
  EXPECT_NEAR(Sample(text, "reprise:time_to_first_token_seconds_sum" + label + "}"), 0.62, 1e-9);
  // Every non-comment line is "name{labels} value".
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line.rfind("reprise:", 0), 0u) << line;
    EXPECT_NE(line.find("} "), std::string::npos) << line;
  }
}

TEST(MetricsTest, EmptyPoolGivesZeroUsage) {
  ServerMetrics metrics;
  std::string text = metrics.Render(EngineStats{}, {}, "m");
  EXPECT_EQ(Sample(text, "reprise:kv_cache_usage_perc{model_name=\"m\"}"), 0);
  EXPECT_EQ(
      Sample(text, "reprise:request_success_total{model_name=\"m\",finished_reason=\"stop\"}"), 0);
}

TEST(MetricsTest, EscapesLabels) { EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd"); }

}  // namespace
}  // namespace reprise::server
