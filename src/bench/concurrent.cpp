// `bench concurrent`: 16 clients at once on a shared-prefix workload (groups of prompts sharing a
// 2,048-token system prompt, a 128-token question each, 64 generated tokens): throughput and
// TTFT percentiles.
#include <fmt/format.h>

#include <exception>
#include <latch>
#include <mutex>
#include <thread>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"
#include "core/clock.h"

namespace reprise::bench {

WorkloadResult RunConcurrentWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "concurrent";
  const int clients = 16;
  const int groups = 4;
  const size_t question_tokens = context.Pick<size_t>(128, 16);
  const int generated = context.Pick(64, 8);
  const size_t system_tokens =
      context.FitToContext("concurrent", context.Pick<size_t>(2048, 128),
                           question_tokens + static_cast<size_t>(generated) + 16, 16);
  const int requests_per_client = context.Pick(2, 1);
  BenchProgress& progress = context.progress();
  progress.Begin("concurrent", 2 + clients * requests_per_client);
  progress.Step("loading the model, warm-up");
  std::unique_ptr<BenchTarget> target = context.MakeTarget(/*prefix_caching=*/true);
  WarmUp(*target);
  progress.Step("writing the prompts");
  std::vector<std::string> systems;
  for (int g = 0; g < groups; ++g) {
    systems.push_back(
        fmt::format("System prompt {} for this group of users.\n", g + 1) +
        FitProse(*target, context.Seed(60'000 + static_cast<uint64_t>(g)), system_tokens));
  }
  // [client][request]
  std::vector<std::vector<BenchRequest>> requests(clients);
  for (int c = 0; c < clients; ++c) {
    for (int r = 0; r < requests_per_client; ++r) {
      BenchRequest request;
      request.prompt = systems[c % groups] + "\nQuestion: " +
                       FitProse(*target, context.Seed(61'000 + 100 * static_cast<uint64_t>(c) + r),
                                question_tokens) +
                       "\nAnswer:";
      request.max_tokens = generated;
      requests[c].push_back(std::move(request));
    }
  }

  std::mutex mutex;
  std::vector<BenchResult> runs;
  std::vector<double> first_ttft, later_ttft;  // a client's first request / its later ones
  std::exception_ptr failure;
  std::latch start(clients + 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      start.arrive_and_wait();
      for (int r = 0; r < requests_per_client; ++r) {
        try {
          BenchResult run = target->Run(requests[c][r]);
          std::lock_guard lock(mutex);
          (r == 0 ? first_ttft : later_ttft).push_back(run.ttft_seconds);
          runs.push_back(std::move(run));
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!failure) failure = std::current_exception();
          return;
        }
        progress.Step(fmt::format("client {} request {} done", c + 1, r + 1));
      }
    });
  }
  start.arrive_and_wait();
  const Clock::time_point began = Clock::now();
  for (auto& thread : threads) thread.join();
  const double wall = SecondsSince(began);
  progress.End();
  if (failure) std::rethrow_exception(failure);

  std::vector<double> ttft;
  size_t prompt = 0, cached = 0, completion = 0;
  for (const auto& run : runs) {
    ttft.push_back(run.ttft_seconds);
    prompt += run.prompt_tokens;
    cached += run.cached_tokens.value_or(0);
    completion += run.completion_tokens;
  }
  const double hit = 100.0 * Ratio(static_cast<double>(cached), static_cast<double>(prompt));
  BenchTable table(
      fmt::format(
          "[concurrent] {} clients x {} requests; {} groups share a {}-token system prompt; "
          "{}-token questions, {} generated tokens",
          clients, requests_per_client, groups, system_tokens, question_tokens, generated),
      {{"requests", ""},
       {"wall", "s"},
       {"generated", "tok/s"},
       {"prompt + generated", "tok/s"},
       {"hit rate", "%"},
       {"TTFT p50", "ms"},
       {"TTFT p90", "ms"},
       {"TTFT p99", "ms"}});
  table.AddRow({runs.size(), BenchCell(wall, 2),
                BenchCell(static_cast<double>(completion) / wall, 1),
                BenchCell(static_cast<double>(prompt + completion) / wall, 1), BenchCell(hit, 1),
                BenchCell(Percentile(ttft, 50) * 1e3, 1), BenchCell(Percentile(ttft, 90) * 1e3, 1),
                BenchCell(Percentile(ttft, 99) * 1e3, 1)});
  result.tables.push_back(std::move(table));
  // The first wave sends every system prompt cold; later requests find theirs cached, and how
  // soon they answer depends on the prefill and admission order (--schedule-policy).
  BenchTable waves(
      fmt::format("[concurrent] TTFT by request ({} order, at most {} running)",
                  context.options().schedule_policy, context.options().max_running_requests),
      {{"requests", ""},
       {"count", ""},
       {"TTFT mean", "ms"},
       {"TTFT p50", "ms"},
       {"TTFT p90", "ms"}});
  auto add_wave = [&](const char* name, const std::vector<double>& samples) {
    if (samples.empty()) return;
    waves.AddRow({name, samples.size(), BenchCell(Mean(samples) * 1e3, 1),
                  BenchCell(Percentile(samples, 50) * 1e3, 1),
                  BenchCell(Percentile(samples, 90) * 1e3, 1)});
  };
  add_wave("first (system prompt cold)", first_ttft);
  add_wave("later (system prompt cached)", later_ttft);
  add_wave("all", ttft);
  result.tables.push_back(std::move(waves));
  std::vector<double> sorted = ttft;
  std::sort(sorted.begin(), sorted.end());
  ChartSpec chart{ChartKind::kLine,
                  "Concurrent clients: TTFT distribution",
                  "request (sorted by TTFT)",
                  "TTFT (ms)",
                  {},
                  {{"TTFT", {}}},
                  {}};
  for (size_t i = 0; i < sorted.size(); ++i) {
    chart.categories.push_back(std::to_string(i + 1));
    chart.series[0].values.push_back(sorted[i] * 1e3);
  }
  result.charts.push_back(std::move(chart));
  result.figures = {
      BenchFigure::Plain("throughput_generated_tok_s", "throughput, generated tokens",
                         static_cast<double>(completion) / wall, "tok/s"),
      BenchFigure::Plain("throughput_total_tok_s", "throughput, prompt + generated tokens",
                         static_cast<double>(prompt + completion) / wall, "tok/s"),
      BenchFigure::Plain("hit_rate", "hit rate", hit, "%"),
      BenchFigure::Plain("ttft_p50_ms", "TTFT p50", Percentile(ttft, 50) * 1e3, "ms"),
      BenchFigure::Plain("ttft_p99_ms", "TTFT p99", Percentile(ttft, 99) * 1e3, "ms"),
      BenchFigure::Plain("ttft_mean_ms", "TTFT mean", Mean(ttft) * 1e3, "ms")};
  if (!later_ttft.empty()) {
    result.figures.push_back(BenchFigure::Plain("ttft_later_p50_ms",
                                                "TTFT p50, system prompt cached",
                                                Percentile(later_ttft, 50) * 1e3, "ms"));
  }
  result.notes = {
      "all clients start together; each sends its requests one after another (closed loop); "
      "client c belongs to group c mod 4, so the first wave sends each system prompt 4 times at "
      "once",
      "wall = first request sent to last request finished; one pass (--repeat is not used here)"};
  return result;
}

}  // namespace reprise::bench
