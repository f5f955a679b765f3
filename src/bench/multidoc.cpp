// `bench multidoc`: 4 to 16 documents visited round robin, each visit a new question, with a KV
// budget that holds only some of them: hit rate and TTFT as the documents outgrow the cache.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"

namespace reprise::bench {

WorkloadResult RunMultidocWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "multidoc";
  const std::vector<int> doc_counts = context.Pick<std::vector<int>>({4, 8, 16}, {4, 8});
  const int rounds = context.Pick(2, 2);
  const int capacity = 6;  // documents the KV budget holds
  const int question_words = 12;
  const int generated = 1;
  const size_t doc_tokens = context.FitToContext("multidoc", context.Pick<size_t>(512, 96),
                                                 2 * question_words + 16 + generated, 32);

  // The budget: `capacity` visits' worth of whole blocks (a visit = document + question).
  size_t budget = 0;
  if (!context.remote()) {
    const size_t block_bytes =
        context.KvBytesPerToken() * static_cast<size_t>(context.options().block_size);
    const size_t visit_tokens =
        doc_tokens + 2 * question_words + 8 + static_cast<size_t>(generated);
    const size_t visit_blocks =
        (visit_tokens + context.options().block_size - 1) / context.options().block_size;
    budget = (static_cast<size_t>(capacity) * visit_blocks + 2) * block_bytes;
  }
  int total = 0;
  for (int docs : doc_counts) total += 1 + docs * rounds;
  BenchProgress& progress = context.progress();
  progress.Begin("multidoc", total);

  BenchTable table(
      context.remote()
          ? fmt::format(
                "[multidoc] {}-token documents visited round robin, {} rounds (server's KV budget)",
                doc_tokens, rounds)
          : fmt::format("[multidoc] {}-token documents visited round robin, {} rounds, KV budget "
                        "{:.1f} MiB (holds about {} documents), eviction policy {}",
                        doc_tokens, rounds, static_cast<double>(budget) / (1 << 20), capacity,
                        context.options().eviction_policy),
      {{"documents", ""},
       {"visits", ""},
       {"hit rate, round 1", "%"},
       {"hit rate, later rounds", "%"},
       {"TTFT p50, round 1", "ms"},
       {"TTFT p50, later", "ms"},
       {"TTFT p99, later", "ms"}});
  ChartSpec hits{ChartKind::kBar,
                 "Multidoc: hit rate after the first round",
                 "documents",
                 "hit rate (%)",
                 {},
                 {{"later rounds", {}}},
                 {}};
  ChartSpec ttft_chart{ChartKind::kBar,
                       "Multidoc: TTFT",
                       "documents",
                       "TTFT p50 (ms)",
                       {},
                       {{"round 1 (cold)", {}}, {"later rounds", {}}},
                       {}};
  for (size_t c = 0; c < doc_counts.size(); ++c) {
    const int docs = doc_counts[c];
    progress.Step(fmt::format("{} documents: loading the model", docs));
    std::unique_ptr<BenchTarget> target = context.MakeTarget(/*prefix_caching=*/true, budget);
    WarmUp(*target);
    std::vector<std::string> documents;
    for (int d = 0; d < docs; ++d) {
      documents.push_back(
          fmt::format("Document {}.\n", d + 1) +
          FitProse(*target, context.Seed(70'000 + 100 * c + static_cast<uint64_t>(d)), doc_tokens));
    }
    std::vector<double> first_ttft, later_ttft;
    size_t first_prompt = 0, first_cached = 0, later_prompt = 0, later_cached = 0;
    std::vector<int> order(static_cast<size_t>(docs));
    std::iota(order.begin(), order.end(), 0);
    for (int round = 0; round < rounds; ++round) {
      if (context.remote() && round > 0) {
        // Over HTTP the server may be a router over replicas: visited in the same order every
        // round, each document would meet the replica it met before whenever a round-robin
        // router sees an even count, which no real traffic does. A seeded shuffle per round.
        std::mt19937_64 random(context.Seed(90'000 + 100 * c + static_cast<uint64_t>(round)));
        std::shuffle(order.begin(), order.end(), random);
      }
      for (int d : order) {
        progress.Step(fmt::format("{} documents: round {}, document {}", docs, round + 1, d + 1));
        BenchRequest request;
        request.prompt =
            documents[d] + "\nQuestion: " +
            Prose(context.Seed(80'000 + 1000 * c + 100 * static_cast<uint64_t>(round) + d),
                  question_words) +
            "?\nAnswer:";
        request.max_tokens = generated;
        BenchResult run = target->Run(request);
        const size_t cached = run.cached_tokens.value_or(0);
        if (round == 0) {
          first_ttft.push_back(run.ttft_seconds);
          first_prompt += run.prompt_tokens;
          first_cached += cached;
        } else {
          later_ttft.push_back(run.ttft_seconds);
          later_prompt += run.prompt_tokens;
          later_cached += cached;
        }
      }
    }
    const double first_hit =
        100.0 * Ratio(static_cast<double>(first_cached), static_cast<double>(first_prompt));
    const double later_hit =
        100.0 * Ratio(static_cast<double>(later_cached), static_cast<double>(later_prompt));
    table.AddRow({docs, docs * rounds, BenchCell(first_hit, 1), BenchCell(later_hit, 1),
                  BenchCell(Median(first_ttft) * 1e3, 1), BenchCell(Median(later_ttft) * 1e3, 1),
                  BenchCell(Percentile(later_ttft, 99) * 1e3, 1)});
    hits.categories.push_back(std::to_string(docs));
    hits.series[0].values.push_back(later_hit);
    ttft_chart.categories.push_back(std::to_string(docs));
    ttft_chart.series[0].values.push_back(Median(first_ttft) * 1e3);
    ttft_chart.series[1].values.push_back(Median(later_ttft) * 1e3);
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("hit_rate_{}_docs", docs),
        fmt::format("hit rate after round 1, {} documents", docs), later_hit, "%"));
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("ttft_{}_docs_ms", docs),
        fmt::format("TTFT p50 after round 1, {} documents", docs), Median(later_ttft) * 1e3, "ms"));
  }
  progress.End();
  result.tables.push_back(std::move(table));
  result.charts = {std::move(hits), std::move(ttft_chart)};
  result.notes = {
      "each visit = a document + a new question, 1 generated token; documents are visited in the "
      "same order every round, a fresh engine per row",
      "hit rate = cached prompt tokens / prompt tokens; round 1 is cold by construction",
      "with strict round robin over more documents than fit, least-recently-used eviction drops "
      "each document just before its next visit: the hit rate shows how the cache copes",
      "one pass per row (rounds are the repetition; --repeat is not used here)"};
  if (context.remote()) {
    result.notes.push_back(
        "over --url the documents are visited in a seeded shuffled order after round 1 (a router "
        "in front of replicas must find where each one went)");
  }
  return result;
}

}  // namespace reprise::bench
