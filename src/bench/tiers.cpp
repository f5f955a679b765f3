// `bench tiers`: the doc workload's ~6,000-token document through the KV tiers. For each run a
// fresh copy of the document is asked about four times: cold (computed), warm from memory, warm
// from disk after memory was cleared (its blocks written to disk first), and warm after the
// engine was restarted on the same disk folder. TTFT of each, and the rate at which blocks were
// loaded from disk (bytes read / the loads' time, verification included).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"

namespace reprise::bench {

namespace {

enum Case { kCold, kMemory, kDisk, kRestart, kCases };
constexpr const char* kCaseNames[kCases] = {"cold (computed)", "warm from memory",
                                            "warm from disk (memory cleared)",
                                            "warm after a restart (disk)"};

// The folder for the disk tier: --kv-disk-path, or a temporary one removed at the end.
class DiskFolder {
 public:
  explicit DiskFolder(const std::string& given) : path_(given), owned_(given.empty()) {
    if (owned_) {
      path_ = (std::filesystem::temp_directory_path() /
               fmt::format("reprise-bench-tiers-{}", ::getpid()))
                  .string();
    }
  }
  ~DiskFolder() {
    std::error_code ignored;
    if (owned_) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_;
};

}  // namespace

WorkloadResult RunTiersWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "tiers";
  const size_t doc_tokens = context.Pick<size_t>(6000, 600);
  const int repeat = context.repeat();
  DiskFolder folder(context.options().kv_disk_path);
  BenchProgress& progress = context.progress();
  progress.Begin("tiers", 2 + repeat * (kCases + 1));
  progress.Step("loading the model, warm-up");
  std::unique_ptr<BenchTarget> target = context.MakeTarget(true, 0, folder.path());
  WarmUp(*target);
  progress.Step("sizing the document");
  FittedText table =
      FitToTokens([](size_t rows) { return TableDocument(static_cast<int>(rows)); }, doc_tokens,
                  [&](const std::string& text) { return target->CountTokens(text); }, 2000);
  const int rows = static_cast<int>(table.units);

  std::vector<std::vector<double>> ttft(kCases);
  std::vector<size_t> prompt_tokens(kCases), cached_tokens(kCases);
  std::vector<double> load_rates;  // GB/s of the disk and restart cases
  for (int r = 0; r < repeat; ++r) {
    const std::string document = fmt::format("Document {} of the tiers benchmark (seed {}).\n",
                                             r + 1, context.options().seed) +
                                 table.text;
    for (int c = 0; c < kCases; ++c) {
      if (c == kDisk) {
        progress.Step(fmt::format("run {}: clearing memory (blocks written to disk)", r + 1));
        target->ClearCache(/*every_tier=*/false);
      } else if (c == kRestart) {
        progress.Step(fmt::format("run {}: restarting the engine", r + 1));
        target.reset();  // a clean stop: what memory holds is on disk
        target = context.MakeTarget(true, 0, folder.path());
        WarmUp(*target);
      }
      progress.Step(fmt::format("run {}: {}", r + 1, kCaseNames[c]));
      std::optional<EngineTimes> before = target->Times();
      BenchRequest request;
      request.prompt = document + TableQuestion(1 + (rows * (2 * c + 1) / 8 + 7 * r) % rows, c);
      request.max_tokens = 1;
      BenchResult run = target->Run(request);
      ttft[c].push_back(run.ttft_seconds);
      prompt_tokens[c] = run.prompt_tokens;
      cached_tokens[c] = run.cached_tokens.value_or(0);
      std::optional<EngineTimes> after = target->Times();
      if ((c == kDisk || c == kRestart) && before && after &&
          after->tier_load_seconds > before->tier_load_seconds) {
        load_rates.push_back(static_cast<double>(after->tier_bytes_read - before->tier_bytes_read) /
                             (after->tier_load_seconds - before->tier_load_seconds) / 1e9);
      }
    }
  }
  progress.End();

  BenchTable table_out(
      fmt::format("[tiers] {}-token document, 1 generated token (TTFT p50 of {} runs)",
                  table.tokens, repeat),
      {{"case", ""},
       {"prompt", "tokens"},
       {"cached", "tokens"},
       {"TTFT", "ms"},
       {"vs memory-warm", "x"},
       {"faster than cold", "x"}});
  ChartSpec chart{ChartKind::kBar,
                  "KV tiers: TTFT of a long document",
                  "case",
                  "TTFT (ms)",
                  {},
                  {{"TTFT p50", {}}},
                  {}};
  const double cold_ms = Median(ttft[kCold]) * 1e3;
  const double memory_ms = Median(ttft[kMemory]) * 1e3;
  for (int c = 0; c < kCases; ++c) {
    const double median = Median(ttft[c]) * 1e3;
    table_out.AddRow({kCaseNames[c], prompt_tokens[c], cached_tokens[c], BenchCell(median, 1),
                      BenchCell(Ratio(median, memory_ms), 2),
                      BenchCell(Ratio(cold_ms, median), 1)});
    chart.categories.push_back(kCaseNames[c]);
    chart.series[0].values.push_back(median);
  }
  const double disk_ms = Median(ttft[kDisk]) * 1e3;
  const double restart_ms = Median(ttft[kRestart]) * 1e3;
  const double load_rate = load_rates.empty() ? std::nan("") : Median(load_rates);
  result.tables.push_back(std::move(table_out));
  result.figures = {
      BenchFigure::Plain("cold_ttft_ms", "cold TTFT", cold_ms, "ms"),
      BenchFigure::Plain("memory_warm_ttft_ms", "memory-warm TTFT", memory_ms, "ms"),
      BenchFigure::Plain("disk_warm_ttft_ms", "disk-warm TTFT (memory cleared)", disk_ms, "ms"),
      BenchFigure::Plain("restart_ttft_ms", "TTFT after a restart", restart_ms, "ms"),
      BenchFigure::Plain("restart_cached_share", "cached share of the prompt after a restart",
                         100.0 * Ratio(static_cast<double>(cached_tokens[kRestart]),
                                       static_cast<double>(prompt_tokens[kRestart])),
                         "%"),
      BenchFigure::AtMost("restart_over_memory_warm", "restart TTFT / memory-warm TTFT",
                          Ratio(restart_ms, memory_ms), "x", 2.0),
      BenchFigure::Plain("cold_over_restart", "speed-up of the restart over cold",
                         Ratio(cold_ms, restart_ms), "x"),
      BenchFigure::Plain("disk_load_gb_per_s", "disk loading rate (verified)", load_rate, "GB/s")};
  result.charts.push_back(std::move(chart));
  result.notes = {
      "each run opens the document with its own first line, so its first request is cold; each "
      "request asks about another row",
      "memory cleared with the engine's ClearCache, which writes the dropped blocks to disk "
      "first; the restart destroys the engine (a clean stop keeps what memory holds on disk) and "
      "starts a new one on the same folder",
      "loading rate = bytes the disk tier read / the loads' time (read + CRC32C + key checks), "
      "from the engine's counters"};
  return result;
}

}  // namespace reprise::bench
