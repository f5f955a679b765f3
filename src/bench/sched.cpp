// `bench sched`: what the scheduler and the prefix cache cost each engine step when the running
// set is full and 1,000 long prompts wait behind it: every step ranks prefill candidates, and
// every finished request makes room for one more, chosen among the waiting by their cached
// prefix. Reported per step beside the forward pass, from the engine's own step-thread times.
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <thread>

#include "bench/stats.h"
#include "bench/workloads.h"
#include "core/clock.h"
#include "core/error.h"

namespace reprise::bench {

WorkloadResult RunSchedWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "sched";
  const size_t queued = 1000;
  const size_t prompt_tokens = context.FitToContext("sched", 8000, 16, 64);
  const int window = context.Pick(40, 8);  // steps measured
  const int running = context.options().max_running_requests;
  BenchProgress& progress = context.progress();
  progress.Begin("sched", 3);
  progress.Step("loading the model");
  EngineConfig config = context.EngineConfigFor(/*prefix_caching=*/true);
  config.max_queued_requests = static_cast<size_t>(running) + queued + 16;
  Engine engine(config);

  // Prompts of random token ids: none shares a block with another, so every one is matched
  // against the cache in full and none is found.
  progress.Step(fmt::format("submitting {} prompts of {} tokens",
                            static_cast<size_t>(running) + queued, prompt_tokens));
  const auto vocab = static_cast<int32_t>(engine.Info().vocab_size);
  std::mt19937_64 random(context.Seed(120'000));
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  for (size_t i = 0; i < static_cast<size_t>(running) + queued; ++i) {
    GenerationRequest request;
    request.prompt_tokens.resize(prompt_tokens);
    for (int32_t& id : request.prompt_tokens) id = token(random);
    request.sampling.temperature = 0;
    request.sampling.max_tokens = 1;  // done at the end of its prefill: a slot frees
    request.sampling.ignore_eos = true;
    engine.Submit(std::move(request), {});
  }

  // Skip the first steps (the running set being admitted) and wait until every request is in
  // the scheduler, then measure `window` steps.
  const size_t total = static_cast<size_t>(running) + queued;
  auto wait_until = [&](auto&& done) {
    Clock::time_point start = Clock::now();
    EngineStats stats = engine.Stats();
    while (!done(stats)) {
      if (SecondsSince(start) > 1800) throw Error("bench sched: the engine made no progress");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      stats = engine.Stats();
    }
    return stats;
  };
  progress.Step(fmt::format("measuring {} steps", window));
  const EngineStats before = wait_until([&](const EngineStats& stats) {
    return stats.steps_total >= 2 &&
           stats.requests_running + stats.requests_waiting + stats.requests_finished >= total;
  });
  const EngineStats after = wait_until([&](const EngineStats& stats) {
    return stats.steps_total >= before.steps_total + static_cast<uint64_t>(window);
  });
  progress.End();

  const auto steps = static_cast<double>(after.steps_total - before.steps_total);
  const double scheduling = after.scheduling_seconds_total - before.scheduling_seconds_total;
  const double forward = after.forward_seconds_total - before.forward_seconds_total;
  const double scheduling_ms = scheduling / steps * 1e3;
  const double forward_ms = forward / steps * 1e3;
  const double share = 100 * scheduling / (scheduling + forward);

  BenchTable table(
      fmt::format("[sched] {} running, {} queued prompts of {} tokens, {} tokens per step ({} "
                  "steps measured)",
                  before.requests_running, before.requests_waiting, prompt_tokens,
                  config.max_batch_tokens, after.steps_total - before.steps_total),
      {{"per step", ""}, {"time", "ms"}, {"share of the step", "%"}});
  table.AddRow({"scheduling and prefix cache", BenchCell(scheduling_ms, 3), BenchCell(share, 3)});
  table.AddRow({"forward pass", BenchCell(forward_ms, 1), BenchCell(100 - share, 3)});
  result.tables.push_back(std::move(table));
  result.figures = {
      BenchFigure::Plain("sched_ms_per_step", "scheduling time per step", scheduling_ms, "ms"),
      BenchFigure::Plain("forward_ms_per_step", "forward time per step", forward_ms, "ms"),
      BenchFigure::AtMost("sched_share_percent", "scheduling share of the step", share, "%", 1.0)};
  result.notes = {
      "scheduling = the engine's step-thread time outside forward passes: admission (ranking the "
      "first 64 waiting requests by cached prefix), prefix matching and block keys, block "
      "allocation, eviction and commits",
      "each request generates 1 token, so one finishes at the end of each prefill and the next is "
      "admitted from the queue",
      "the share is measured in one run against that run's forward passes: a larger model makes "
      "it smaller"};
  return result;
}

}  // namespace reprise::bench
