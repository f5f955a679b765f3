// `bench multidoc`: 4 to 16 documents visited round robin, each visit a new question, with a KV
// budget that holds only some of them (about 4 by default, or --kv-cache-memory) and, with
// --kv-disk-path, a disk tier for all: hit rate and TTFT as the documents outgrow memory, beside
// the TTFT of a visit whose document memory holds.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"
#include "core/byte_size.h"

namespace reprise::bench {
namespace {

constexpr int kDefaultCapacity = 4;  // documents the default KV budget holds
constexpr int kQuestionWords = 6;    // a short question: the part of each visit never cached
constexpr int kGenerated = 1;
constexpr int kMemoryWarmVisits = 5;

}  // namespace

WorkloadResult RunMultidocWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "multidoc";
  const BenchOptions& options = context.options();
  const std::vector<int> doc_counts = context.Pick<std::vector<int>>({4, 8, 16}, {4, 8});
  const int rounds = context.Pick(2, 2);
  // Long documents, so that each visit's new question (about 30 tokens, never cached) is a small
  // share of its prompt: the hit rate then measures the cache, not the question.
  const size_t doc_tokens = context.FitToContext("multidoc", context.Pick<size_t>(1024, 96),
                                                 2 * kQuestionWords + 16 + kGenerated, 32);

  // The budget: --kv-cache-memory, else kDefaultCapacity visits' worth of whole blocks.
  size_t budget = 0;
  double capacity = 0;  // documents the budget holds
  const bool disk = !options.kv_disk_path.empty();
  if (!context.remote()) {
    const auto block_size = static_cast<size_t>(options.block_size);
    const size_t block_bytes = context.KvBytesPerToken() * block_size;
    const size_t visit_tokens =
        doc_tokens + 2 * kQuestionWords + 8 + static_cast<size_t>(kGenerated);
    const size_t visit_bytes = (visit_tokens + block_size - 1) / block_size * block_bytes;
    budget = options.kv_cache_memory.empty()
                 ? static_cast<size_t>(kDefaultCapacity) * visit_bytes + 2 * block_bytes
                 : ParseByteSize(options.kv_cache_memory);
    capacity = static_cast<double>(budget) / static_cast<double>(visit_bytes);
  }
  int total = 0;
  for (int docs : doc_counts) total += 1 + docs * rounds + kMemoryWarmVisits;
  BenchProgress& progress = context.progress();
  progress.Begin("multidoc", total);

  BenchTable table(
      context.remote()
          ? fmt::format(
                "[multidoc] {}-token documents visited round robin, {} rounds (server's KV budget)",
                doc_tokens, rounds)
          : fmt::format("[multidoc] {}-token documents visited round robin, {} rounds, KV budget "
                        "{:.1f} MiB (holds about {:.1f} documents), {}, eviction policy {}",
                        doc_tokens, rounds, static_cast<double>(budget) / (1 << 20), capacity,
                        disk ? "disk tier " + options.kv_disk_path : std::string("no disk tier"),
                        options.eviction_policy),
      {{"documents", ""},
       {"visits", ""},
       {"hit rate, round 1", "%"},
       {"hit rate, later rounds", "%"},
       {"TTFT p50, round 1", "ms"},
       {"TTFT p50, later", "ms"},
       {"TTFT p99, later", "ms"},
       {"TTFT p50, memory-warm", "ms"},
       {"later / memory-warm", "x"}});
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
                       {{"round 1 (cold)", {}}, {"later rounds", {}}, {"memory-warm", {}}},
                       {}};
  for (size_t c = 0; c < doc_counts.size(); ++c) {
    const int docs = doc_counts[c];
    progress.Step(fmt::format("{} documents: loading the model", docs));
    std::unique_ptr<BenchTarget> target = context.MakeTarget(/*prefix_caching=*/true, budget);
    WarmUp(*target);
    // Round 1 is cold by construction: nothing from an earlier run on the same disk folder.
    target->ClearCache(/*every_tier=*/true);
    std::vector<std::string> documents;
    for (int d = 0; d < docs; ++d) {
      documents.push_back(
          fmt::format("Document {}.\n", d + 1) +
          FitProse(*target, context.Seed(70'000 + 100 * c + static_cast<uint64_t>(d)), doc_tokens));
    }
    uint64_t question = 0;
    auto visit = [&](int d) {
      BenchRequest request;
      request.prompt = documents[static_cast<size_t>(d)] + "\nQuestion: " +
                       Prose(context.Seed(80'000 + 1000 * c + ++question), kQuestionWords) +
                       "?\nAnswer:";
      request.max_tokens = kGenerated;
      return target->Run(request);
    };
    std::vector<double> first_ttft, later_ttft, warm_ttft;
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
        BenchResult run = visit(d);
        const size_t cached = run.cached_tokens.value_or(0);
        (round == 0 ? first_ttft : later_ttft).push_back(run.ttft_seconds);
        (round == 0 ? first_prompt : later_prompt) += run.prompt_tokens;
        (round == 0 ? first_cached : later_cached) += cached;
      }
    }
    // The reference: new questions on the document visited last, which memory still holds.
    for (int i = 0; i < kMemoryWarmVisits; ++i) {
      progress.Step(fmt::format("{} documents: memory-warm visit {}", docs, i + 1));
      warm_ttft.push_back(visit(docs - 1).ttft_seconds);
    }
    const double first_hit =
        100.0 * Ratio(static_cast<double>(first_cached), static_cast<double>(first_prompt));
    const double later_hit =
        100.0 * Ratio(static_cast<double>(later_cached), static_cast<double>(later_prompt));
    const double later_p50 = Median(later_ttft) * 1e3;
    const double warm_p50 = Median(warm_ttft) * 1e3;
    const double versus_warm = Ratio(later_p50, warm_p50);
    table.AddRow({docs, docs * rounds, BenchCell(first_hit, 1), BenchCell(later_hit, 1),
                  BenchCell(Median(first_ttft) * 1e3, 1), BenchCell(later_p50, 1),
                  BenchCell(Percentile(later_ttft, 99) * 1e3, 1), BenchCell(warm_p50, 1),
                  BenchCell(versus_warm, 2)});
    hits.categories.push_back(std::to_string(docs));
    hits.series[0].values.push_back(later_hit);
    ttft_chart.categories.push_back(std::to_string(docs));
    ttft_chart.series[0].values.push_back(Median(first_ttft) * 1e3);
    ttft_chart.series[1].values.push_back(later_p50);
    ttft_chart.series[2].values.push_back(warm_p50);
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("hit_rate_{}_docs", docs),
        fmt::format("hit rate after round 1, {} documents", docs), later_hit, "%"));
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("ttft_{}_docs_ms", docs),
        fmt::format("TTFT p50 after round 1, {} documents", docs), later_p50, "ms"));
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("ttft_memory_warm_{}_docs_ms", docs),
        fmt::format("TTFT p50 with the document in memory, {} documents", docs), warm_p50, "ms"));
    result.figures.push_back(BenchFigure::Plain(
        fmt::format("ttft_vs_memory_warm_{}_docs", docs),
        fmt::format("TTFT p50 after round 1 / memory-warm TTFT, {} documents", docs), versus_warm,
        "x"));
  }
  progress.End();
  result.tables.push_back(std::move(table));
  result.charts = {std::move(hits), std::move(ttft_chart)};
  result.notes = {
      "each visit = a document + a new question, 1 generated token; in process, documents are "
      "visited in the same order every round, a fresh engine per row with every tier cleared first",
      "hit rate = cached prompt tokens / prompt tokens, over the visits of that round (later "
      "rounds: every round after the first); round 1 is cold by construction. The new question "
      "and the block it shares with the document's end are never cached, which bounds the rate",
      "memory-warm = new questions on the document visited last (in memory): the TTFT a visit "
      "would have if memory held every document",
      "with strict round robin over more documents than memory holds, each document is evicted "
      "before its next visit: without a disk tier (--kv-disk-path) it is recomputed",
      "one pass per row (rounds are the repetition; --repeat is not used here)"};
  if (context.remote()) {
    result.notes.push_back(
        "over --url the documents are visited in a seeded shuffled order after round 1 (a router "
        "in front of replicas must find where each one went)");
  }
  return result;
}

}  // namespace reprise::bench
