// `bench unique`: prompts that share nothing, on an engine with prefix caching on and one with it
// off, interleaved: what the cache costs when there is nothing to reuse.
#include <fmt/format.h>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"

namespace reprise::bench {

WorkloadResult RunUniqueWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "unique";
  const int generated = context.Pick(32, 8);
  const size_t prompt_tokens = context.FitToContext("unique", context.Pick<size_t>(512, 64),
                                                    static_cast<size_t>(generated) + 8, 16);
  // Per-prompt ratios spread by +-15% on a shared machine: the median needs a few dozen pairs,
  // and its 95% interval narrows only as one over the square root of their number, so --repeat
  // is not capped: a run that must pin the cost within a point takes several hundred.
  const int pairs = context.Pick(12, 1) * context.repeat();
  const bool compare = !context.remote();
  // Both engines get a KV budget of `capacity` prompts, so that the reuse-on engine's cache is
  // full after the first few and every later prompt pays for evicting what it replaces.
  const int capacity = 3;
  size_t budget = 0;
  if (compare) {
    const size_t block_size = static_cast<size_t>(context.options().block_size);
    const size_t prompt_blocks =
        (prompt_tokens + 8 + static_cast<size_t>(generated) + block_size - 1) / block_size;
    budget = (static_cast<size_t>(capacity) * prompt_blocks + 2) * block_size *
             context.KvBytesPerToken();
  }
  // Two engines with reuse off, run this way, differ by 1-3% on this kind of machine, the one
  // made first being the slower. So the pair of engines is made afresh every `round` prompts, in
  // the other order each time, and the bias cancels between rounds.
  const int round = 2 * capacity;
  const int rounds = compare ? (pairs + round - 1) / round : 1;
  BenchProgress& progress = context.progress();
  progress.Begin("unique", rounds + pairs * (compare ? 2 : 1));
  std::unique_ptr<BenchTarget> on;
  std::unique_ptr<BenchTarget> off;
  // The engines' own account of their step thread, summed over rounds from after each warm-up.
  struct StepTime {
    EngineTimes start;
    double scheduling_seconds = 0;
    double forward_seconds = 0;
    int prompts = 0;
    bool known = true;
  };
  StepTime on_time, off_time;
  auto settle = [](BenchTarget* target, StepTime& time) {
    if (target == nullptr) return;
    std::optional<EngineTimes> now = target->Times();
    if (!now) {
      time.known = false;
      return;
    }
    time.scheduling_seconds += now->scheduling_seconds - time.start.scheduling_seconds;
    time.forward_seconds += now->forward_seconds - time.start.forward_seconds;
  };
  auto begin = [](BenchTarget& target, StepTime& time) {
    time.start = target.Times().value_or(EngineTimes{});
  };
  auto make_engines = [&](int index) {
    progress.Step(fmt::format("round {}: loading the models, warm-up", index + 1));
    settle(on.get(), on_time);
    settle(off.get(), off_time);
    on.reset();
    off.reset();
    if (!compare) {
      on = context.MakeTarget(/*prefix_caching=*/true, budget);
      WarmUp(*on);
      begin(*on, on_time);
      return;
    }
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == (index % 2 == 0)) {
        on = context.MakeTarget(/*prefix_caching=*/true, budget);
        WarmUp(*on);
        begin(*on, on_time);
      } else {
        off = context.MakeTarget(/*prefix_caching=*/false, budget);
        WarmUp(*off);
        begin(*off, off_time);
      }
    }
  };
  make_engines(0);
  struct Samples {
    std::vector<double> ttft, total, throughput, cached;
  };
  Samples with, without;
  std::vector<double> total_ratio, ttft_ratio, cpu_ratio;  // on / off, per pair
  size_t measured_prompt = 0;
  for (int i = 0; i < pairs; ++i) {
    if (compare && i > 0 && i % round == 0) make_engines(i / round);
    BenchRequest request;
    request.prompt = FitProse(*on, context.Seed(90'000 + static_cast<uint64_t>(i)), prompt_tokens);
    request.max_tokens = generated;
    auto measure = [&](BenchTarget& target, Samples& samples, const char* name) {
      progress.Step(fmt::format("prompt {}, reuse {}", i + 1, name));
      BenchResult run = target.Run(request);
      ++(&target == on.get() ? on_time : off_time).prompts;
      samples.ttft.push_back(run.ttft_seconds);
      samples.total.push_back(run.total_seconds);
      samples.throughput.push_back(static_cast<double>(run.prompt_tokens + run.completion_tokens) /
                                   run.total_seconds);
      samples.cached.push_back(static_cast<double>(run.cached_tokens.value_or(0)));
      measured_prompt = run.prompt_tokens;
      return run;
    };
    // Alternate which goes first, so that drift in the machine's speed hits both alike.
    if (!compare) {
      measure(*on, with, "on");
      continue;
    }
    BenchResult a, b;
    if (i % 2 == 0) {
      a = measure(*on, with, "on");
      b = measure(*off, without, "off");
    } else {
      b = measure(*off, without, "off");
      a = measure(*on, with, "on");
    }
    total_ratio.push_back(a.total_seconds / b.total_seconds);
    ttft_ratio.push_back(a.ttft_seconds / b.ttft_seconds);
    if (a.cpu_seconds && b.cpu_seconds && *b.cpu_seconds > 0) {
      cpu_ratio.push_back(*a.cpu_seconds / *b.cpu_seconds);
    }
  }
  settle(on.get(), on_time);
  settle(off.get(), off_time);
  progress.End();

  BenchTable table(fmt::format("[unique] {} prompts of {} tokens sharing nothing, {} generated "
                               "tokens each{}",
                               pairs, measured_prompt, generated,
                               compare ? ", reuse on and off interleaved" : ""),
                   {{"prefix caching", ""},
                    {"cached p50", "tokens"},
                    {"TTFT p50", "ms"},
                    {"total p50", "ms"},
                    {"throughput p50", "tok/s"}});
  auto add = [&](const char* name, const Samples& samples) {
    table.AddRow(
        {name, BenchCell(Median(samples.cached), 0), BenchCell(Median(samples.ttft) * 1e3, 1),
         BenchCell(Median(samples.total) * 1e3, 1), BenchCell(Median(samples.throughput), 1)});
  };
  add(compare ? "on" : "server", with);
  ChartSpec chart{ChartKind::kBar,
                  "Unique prompts: cost of the cache",
                  "prefix caching",
                  "throughput (tok/s)",
                  {compare ? "on" : "server"},
                  {{"throughput p50", {Median(with.throughput)}}},
                  {}};
  result.figures = {
      BenchFigure::Plain("ttft_ms", "TTFT p50", Median(with.ttft) * 1e3, "ms"),
      BenchFigure::Plain("throughput_tok_s", "throughput p50", Median(with.throughput), "tok/s")};
  if (compare) {
    add("off", without);
    chart.categories.push_back("off");
    chart.series[0].values.push_back(Median(without.throughput));
    const double cost_total = 100.0 * (Median(total_ratio) - 1.0);
    const double cost_ttft = 100.0 * (Median(ttft_ratio) - 1.0);
    BenchTable cost(
        "[unique] cost of the cache (on / off - 1, per prompt: the median, its 95% "
        "confidence interval, the extremes)",
        {{"measure", ""},
         {"cost", "%"},
         {"95% low", "%"},
         {"95% high", "%"},
         {"min", "%"},
         {"max", "%"}});
    auto add_cost = [&](const char* name, const std::vector<double>& ratios) {
      const Interval interval = MedianInterval(ratios);
      cost.AddRow(
          {name, BenchCell(100.0 * (Median(ratios) - 1.0), 2),
           BenchCell(100.0 * (interval.low - 1.0), 2), BenchCell(100.0 * (interval.high - 1.0), 2),
           BenchCell(100.0 * (Min(ratios) - 1.0), 2), BenchCell(100.0 * (Max(ratios) - 1.0), 2)});
    };
    add_cost("request time", total_ratio);
    add_cost("TTFT", ttft_ratio);
    const bool have_cpu = !cpu_ratio.empty();
    if (have_cpu) add_cost("CPU time", cpu_ratio);
    result.tables.push_back(std::move(table));
    result.tables.push_back(std::move(cost));
    const Interval total_interval = MedianInterval(total_ratio);
    result.figures.push_back(BenchFigure::AtMost(
        "cache_cost_percent", "cost of reuse on (request time)", cost_total, "%", 1.0));
    result.figures.push_back(BenchFigure::Plain("cache_cost_ci_low_percent",
                                                "cost of reuse on, 95% interval low",
                                                100.0 * (total_interval.low - 1.0), "%"));
    result.figures.push_back(BenchFigure::Plain("cache_cost_ci_high_percent",
                                                "cost of reuse on, 95% interval high",
                                                100.0 * (total_interval.high - 1.0), "%"));
    result.figures.push_back(
        BenchFigure::Plain("cache_cost_ttft_percent", "cost of reuse on (TTFT)", cost_ttft, "%"));
    if (have_cpu) {
      result.figures.push_back(BenchFigure::Plain("cache_cost_cpu_percent",
                                                  "cost of reuse on (CPU time)",
                                                  100.0 * (Median(cpu_ratio) - 1.0), "%"));
    }
    // What the engines measured of their own step thread: the scheduling work the cache adds
    // (hashing, matching, indexing, eviction) set against the whole request, without the
    // machine's noise in the comparison of two separate runs.
    if (on_time.known && off_time.known && on_time.prompts > 0 && off_time.prompts > 0) {
      auto per_prompt = [](double seconds, int prompts) {
        return seconds / static_cast<double>(prompts) * 1e3;
      };
      const double on_ms = per_prompt(on_time.scheduling_seconds, on_time.prompts);
      const double off_ms = per_prompt(off_time.scheduling_seconds, off_time.prompts);
      const double request_ms = Median(with.total) * 1e3;
      BenchTable step(
          "[unique] the engines' step thread per prompt: scheduling (admission, "
          "prefix matching and hashing, block allocation, eviction, commits) and "
          "forward passes",
          {{"prefix caching", ""},
           {"scheduling", "ms"},
           {"forward", "ms"},
           {"scheduling / request", "%"}});
      step.AddRow({"on", BenchCell(on_ms, 3),
                   BenchCell(per_prompt(on_time.forward_seconds, on_time.prompts), 1),
                   BenchCell(100.0 * on_ms / request_ms, 3)});
      step.AddRow({"off", BenchCell(off_ms, 3),
                   BenchCell(per_prompt(off_time.forward_seconds, off_time.prompts), 1),
                   BenchCell(100.0 * off_ms / Median(without.total) / 1e3, 3)});
      result.tables.push_back(std::move(step));
      result.figures.push_back(BenchFigure::Plain("cache_bookkeeping_us",
                                                  "scheduling time reuse on adds per prompt",
                                                  (on_ms - off_ms) * 1e3, "us"));
      result.figures.push_back(BenchFigure::Plain("cache_bookkeeping_percent",
                                                  "scheduling time reuse on adds, of a request",
                                                  100.0 * (on_ms - off_ms) / request_ms, "%"));
    }
  } else {
    result.tables.push_back(std::move(table));
  }
  result.charts.push_back(std::move(chart));
  result.notes = {
      "the same prompt goes to both engines, one after the other, the order alternating from "
      "prompt to prompt; the cost is the median of the per-prompt ratios, so slow spells of a "
      "shared machine mostly cancel",
      fmt::format("both engines are made afresh every {} prompts, in the other order each time: "
                  "of two identical engines the one made first measured 1-3% slower here",
                  round),
      fmt::format("prompts start with a different word each, so only BOS can match; both "
                  "engines get a KV budget of {} prompts, so the reuse-on engine's cache is full "
                  "from prompt {} on and it hashes, indexes and evicts for every prompt",
                  capacity, capacity + 1)};
  if (compare) {
    result.notes.push_back(
        "the 95% interval of the median ratio comes from order statistics (binomial ranks), "
        "whatever the shape of the noise; the step-thread table is the engines' own account "
        "(EngineStats), so the cache's bookkeeping is seen apart from the machine's noise");
  } else {
    result.notes.push_back("against a server only its own setting is measured");
  }
  if (!cpu_ratio.empty()) {
    result.notes.push_back(
        "CPU time: the process's CPU time from submission to the last token (all threads); time "
        "the machine gave to other work does not count, so it varies less than request time on "
        "a shared machine");
  }
  return result;
}

}  // namespace reprise::bench
