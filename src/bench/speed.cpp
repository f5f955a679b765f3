// `bench prefill` and `bench decode`: tok/s for 512- and 2048-token prompts that share nothing,
// with reuse off in process, so every prompt token is computed. In process, decode is also set
// against the memory bandwidth measured beside each run: the bytes a token reads (weights and
// K/V) times tokens per second, as a share of the best streaming-read pass.
#include <fmt/format.h>

#include <algorithm>

#include "bench/peak.h"
#include "bench/stats.h"
#include "bench/workloads.h"
#include "core/thread_pool.h"
#include "kernels/cpu_target.h"

namespace reprise::bench {

namespace {

constexpr int kReadPassesPerRun = 3;

// What one decoded token reads, at a mean context of `positions`: the weights, and the K/V of
// every layer at those positions (a block's bytes over its positions).
struct DecodeTraffic {
  double weight_bytes = 0;
  double kv_bytes_per_position = 0;
  double BytesPerToken(double positions) const {
    return weight_bytes + kv_bytes_per_position * positions;
  }
};

// Zero weight_bytes when the target cannot say (a server).
DecodeTraffic TrafficOf(BenchTarget& target) {
  std::optional<ModelInfo> info = target.Info();
  if (!info || info->decode_weight_bytes == 0 || info->kv_cache_blocks <= 0 ||
      info->block_size <= 0) {
    return {};
  }
  return DecodeTraffic{.weight_bytes = static_cast<double>(info->decode_weight_bytes),
                       .kv_bytes_per_position = static_cast<double>(info->kv_cache_bytes) /
                                                static_cast<double>(info->kv_cache_blocks) /
                                                info->block_size};
}

}  // namespace

WorkloadResult RunSpeedWorkload(const BenchContext& context, bool decode) {
  WorkloadResult result;
  result.name = decode ? "decode" : "prefill";
  const int generated = decode ? context.Pick(128, 16) : 1;
  // Each prompt length, or the longest that fits the context beside the generated tokens (once).
  std::vector<size_t> lengths;
  for (size_t wanted : context.Pick<std::vector<size_t>>({512, 2048}, {64, 128})) {
    size_t fitted = context.FitToContext(decode ? "decode" : "prefill", wanted,
                                         static_cast<size_t>(generated) + 8, 16);
    if (lengths.empty() || lengths.back() != fitted) lengths.push_back(fitted);
  }
  BenchProgress& progress = context.progress();
  progress.Begin(result.name, 1 + static_cast<int>(lengths.size()) * context.repeat());
  progress.Step("loading the model, warm-up");
  std::unique_ptr<BenchTarget> target = context.MakeTarget(/*prefix_caching=*/false);
  WarmUp(*target);
  // Decode in process: the read probe runs between the runs, on as many threads.
  const DecodeTraffic traffic = decode ? TrafficOf(*target) : DecodeTraffic{};
  std::unique_ptr<ThreadPool> probe_pool;
  std::unique_ptr<ReadBandwidthProbe> read_probe;
  if (traffic.weight_bytes > 0) {
    probe_pool = std::make_unique<ThreadPool>(context.threads());
    read_probe = std::make_unique<ReadBandwidthProbe>(kernels::BestCpuTarget(), *probe_pool,
                                                      context.Pick<size_t>(256, 32) << 20);
  }
  BenchTable bandwidth(
      fmt::format("[decode] against memory bandwidth ({} threads; the read probe between runs)",
                  context.threads()),
      {{"prompt", "tokens"},
       {"weights", "MiB"},
       {"K/V read", "MiB/token"},
       {"decode p50", "tok/s"},
       {"read", "GB/s"},
       {"read peak beside", "GB/s"},
       {"of the peak", "%"}});

  std::vector<BenchColumn> columns = {{"prompt", "tokens"},     {"cached", "tokens"},
                                      {"generated", "tokens"},  {"TTFT p50", "ms"},
                                      {"prefill p50", "tok/s"}, {"prefill min", "tok/s"},
                                      {"prefill max", "tok/s"}};
  if (decode) {
    columns.insert(columns.end(),
                   {{"decode p50", "tok/s"}, {"decode min", "tok/s"}, {"decode max", "tok/s"}});
  }
  BenchTable table(
      fmt::format("[{}] {} ({} runs each, {})", result.name,
                  decode ? "prefill then decode" : "prefill", context.repeat(), target->Describe()),
      columns);
  ChartSpec chart{ChartKind::kBar,
                  decode ? "Prefill and decode speed" : "Prefill speed",
                  "prompt tokens",
                  "tok/s",
                  {},
                  {{"prefill", {}}},
                  {}};
  if (decode) chart.series.push_back({"decode", {}});

  for (size_t length : lengths) {
    std::vector<double> ttft, prefill, decoding;
    size_t prompt_tokens = 0;
    size_t cached = 0;
    size_t completion = 0;
    double read_peak = 0;
    for (int r = 0; r < context.repeat(); ++r) {
      progress.Step(fmt::format("{}-token prompt, run {}", length, r + 1));
      // A fresh seed per run: no run can reuse another's prefix, even on a server with reuse on.
      BenchRequest request;
      request.prompt = FitProse(
          *target, context.Seed(10'000 * length + 100 * static_cast<uint64_t>(decode) + r), length);
      request.max_tokens = generated;
      BenchResult run = target->Run(request);
      ttft.push_back(run.ttft_seconds);
      prefill.push_back(run.PrefillTokensPerSecond());
      if (decode) decoding.push_back(run.DecodeTokensPerSecond());
      prompt_tokens = std::max(prompt_tokens, run.prompt_tokens);
      cached = std::max(cached, run.cached_tokens.value_or(0));
      completion = run.completion_tokens;
      if (read_probe) read_peak = std::max(read_peak, read_probe->Best(kReadPassesPerRun));
    }
    std::vector<BenchCell> row = {prompt_tokens,
                                  cached,
                                  completion,
                                  BenchCell(Median(ttft) * 1e3, 1),
                                  BenchCell(Median(prefill), 1),
                                  BenchCell(Min(prefill), 1),
                                  BenchCell(Max(prefill), 1)};
    if (decode) {
      row.insert(row.end(), {BenchCell(Median(decoding), 1), BenchCell(Min(decoding), 1),
                             BenchCell(Max(decoding), 1)});
    }
    table.AddRow(std::move(row));
    chart.categories.push_back(std::to_string(prompt_tokens));
    chart.series[0].values.push_back(Median(prefill));
    if (decode) chart.series[1].values.push_back(Median(decoding));

    const std::string key = std::to_string(length);
    if (!decode && length == 512) {
      result.figures.push_back(BenchFigure::AtLeast(
          "prefill_512_tok_s", "prefill, 512-token prompt", Median(prefill), "tok/s", 450));
    } else if (!decode) {
      result.figures.push_back(BenchFigure::Plain("prefill_" + key + "_tok_s",
                                                  "prefill, " + key + "-token prompt",
                                                  Median(prefill), "tok/s"));
    } else if (length == lengths.front()) {
      result.figures.push_back(BenchFigure::AtLeast(
          "decode_" + key + "_tok_s", fmt::format("decode after a {}-token prompt", key),
          Median(decoding), "tok/s", 110));
    } else {
      result.figures.push_back(BenchFigure::Plain(
          "decode_" + key + "_tok_s", fmt::format("decode after a {}-token prompt", key),
          Median(decoding), "tok/s"));
    }
    if (traffic.weight_bytes > 0 && completion > 1 && read_peak > 0) {
      // Decode steps 1 .. completion - 1 attend over prompt + 1 .. prompt + completion - 1
      // positions: prompt + completion / 2 on average.
      const double positions =
          static_cast<double>(prompt_tokens) + static_cast<double>(completion) / 2;
      const double gb_per_s = traffic.BytesPerToken(positions) * Median(decoding) / 1e9;
      const double share = 100.0 * gb_per_s / read_peak;
      bandwidth.AddRow({prompt_tokens, BenchCell(traffic.weight_bytes / (1 << 20), 1),
                        BenchCell(traffic.kv_bytes_per_position * positions / (1 << 20), 2),
                        BenchCell(Median(decoding), 1), BenchCell(gb_per_s, 1),
                        BenchCell(read_peak, 1), BenchCell(share, 0)});
      result.figures.push_back(BenchFigure::Plain(
          "decode_" + std::to_string(length) + "_read_share",
          fmt::format("decode after a {}-token prompt, share of the read peak", length), share,
          "%"));
    }
  }
  progress.End();
  result.tables.push_back(std::move(table));
  if (!bandwidth.rows().empty()) result.tables.push_back(std::move(bandwidth));
  result.charts.push_back(std::move(chart));
  result.notes = {
      "prefill tok/s = prompt tokens / TTFT (TTFT: submission to the first generated token)",
      "prompts are seeded prose, a new seed each run, so nothing is reused; in process the engine "
      "runs with prefix caching off"};
  if (decode) {
    result.notes.push_back(
        "decode tok/s = (generated - 1) / (total time - TTFT), greedy, EOS ignored");
    if (traffic.weight_bytes > 0) {
      result.notes.push_back(
          "against memory bandwidth: a decoded token reads every weight but the embedding table "
          "(one row of it) and the K/V of every layer at its positions; read = those bytes x "
          "decode p50; the peak is the best streaming-read pass run between the runs");
    }
  }
  result.notes.push_back("the targets are for the 135m Q8_0 model on 2 threads");
  return result;
}

}  // namespace reprise::bench
