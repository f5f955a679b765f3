// `bench chat`: an 8-turn chat over a long system prompt. Each turn's prompt is the previous
// prompt, its answer and a new user message, so each turn can reuse everything before it.
#include <fmt/format.h>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"
#include "core/error.h"

namespace reprise::bench {

namespace {

constexpr int kTurns = 8;

std::string UserMessage(const BenchContext& context, int conversation, int turn) {
  return "\nUser: " +
         Prose(context.Seed(50'000 + 100 * static_cast<uint64_t>(conversation) + turn), 36) +
         "\nAssistant:";
}

}  // namespace

WorkloadResult RunChatWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "chat";
  const int answer_tokens = context.Pick(32, 8);
  // Beside the system prompt: every turn's user message (36 words) and answer.
  const size_t system_tokens =
      context.FitToContext("chat", context.Pick<size_t>(1500, 200),
                           32 + kTurns * (64 + static_cast<size_t>(answer_tokens)), 32);
  const int repeat = context.repeat();
  BenchProgress& progress = context.progress();
  const bool replay = !context.remote();
  progress.Begin("chat", 1 + repeat * kTurns + (replay ? kTurns + repeat * (kTurns - 1) : 0));
  progress.Step("loading the model, warm-up");
  std::unique_ptr<BenchTarget> target = context.MakeTarget(/*prefix_caching=*/true);
  WarmUp(*target);

  // [turn][conversation]
  std::vector<std::vector<double>> ttft(kTurns);
  std::vector<std::vector<double>> hit(kTurns);
  std::vector<size_t> prompt_tokens(kTurns), cached_tokens(kTurns);
  std::vector<std::string> first_prompts;  // the first conversation's prompts, for the replay
  // In process, each later turn is followed at once by its new tokens alone (the suffix its warm
  // run computed, now at positions from 0, which match no cached block) on the same engine: the
  // compute a warm turn cannot avoid, but for attending over the cached part. Back to back in one
  // process, the pair shares the machine's state; measured minutes apart (after the
  // conversation, on another engine), the machine's drift between the two was as large as the
  // attention being measured. So the ratio is taken per pair, in every conversation, and a
  // turn's figure is the median of its pairs: with the new tokens alone run once per turn (in
  // the first conversation only) beside the median TTFT of all three, a 1B model's turns of the
  // same size read 1.04 to 1.51, the noise of single runs.
  std::vector<std::vector<double>> new_alone_ttft(kTurns);   // [turn][conversation]
  std::vector<std::vector<double>> ttft_over_alone(kTurns);  // [turn][conversation]
  for (int c = 0; c < repeat; ++c) {
    std::string prompt =
        "System: You are a careful assistant. Answer from these notes.\n" +
        FitProse(*target, context.Seed(40'000 + static_cast<uint64_t>(c)), system_tokens);
    for (int turn = 0; turn < kTurns; ++turn) {
      progress.Step(fmt::format("conversation {}, turn {}", c + 1, turn + 1));
      prompt += UserMessage(context, c, turn);
      BenchRequest request;
      request.prompt = prompt;
      request.max_tokens = answer_tokens;
      BenchResult run = target->Run(request);
      ttft[turn].push_back(run.ttft_seconds);
      hit[turn].push_back(static_cast<double>(run.cached_tokens.value_or(0)) /
                          static_cast<double>(std::max<size_t>(1, run.prompt_tokens)));
      prompt_tokens[turn] = run.prompt_tokens;
      cached_tokens[turn] = run.cached_tokens.value_or(0);
      if (c == 0) first_prompts.push_back(prompt);
      if (replay && turn > 0) {
        progress.Step(fmt::format("turn {}: its new tokens alone", turn + 1));
        const std::vector<int32_t> tokens = target->Tokenize(prompt);
        const size_t fresh =
            std::min(run.prompt_tokens - run.cached_tokens.value_or(0), tokens.size());
        BenchRequest alone;
        alone.prompt_tokens.assign(tokens.end() - static_cast<std::ptrdiff_t>(fresh), tokens.end());
        alone.max_tokens = 1;
        // Its own salt: no block of an earlier turn's tokens alone can match (answers often
        // open alike, and a match would shorten the prefill it stands for).
        alone.cache_salt = fmt::format("chat-new-tokens-alone-{}-{}", c, turn);
        const BenchResult alone_run = target->Run(alone);
        if (alone_run.cached_tokens.value_or(0) > 0) {  // not the prefill it stands for
          throw Error(fmt::format("chat: turn {}'s new tokens alone found {} tokens cached",
                                  turn + 1, *alone_run.cached_tokens));
        }
        new_alone_ttft[turn].push_back(alone_run.ttft_seconds);
        ttft_over_alone[turn].push_back(Ratio(run.ttft_seconds, alone_run.ttft_seconds));
      }
      prompt += run.text;
    }
  }

  // Reuse off, in process: the first conversation's prompts again, every token computed.
  std::vector<double> off_ttft(kTurns, std::nan(""));
  if (replay) {
    target.reset();
    std::unique_ptr<BenchTarget> off = context.MakeTarget(/*prefix_caching=*/false);
    WarmUp(*off);
    for (int turn = 0; turn < kTurns; ++turn) {
      progress.Step(fmt::format("reuse off, turn {}", turn + 1));
      BenchRequest request;
      request.prompt = first_prompts[turn];
      request.max_tokens = 1;
      off_ttft[turn] = off->Run(request).ttft_seconds;
    }
  }
  progress.End();

  BenchTable table(fmt::format("[chat] {} turns over a {}-token system prompt, {}-token answers "
                               "(TTFT p50 of {} conversations)",
                               kTurns, system_tokens, answer_tokens, repeat),
                   {{"turn", ""},
                    {"prompt", "tokens"},
                    {"cached", "tokens"},
                    {"hit rate", "%"},
                    {"TTFT", "ms"},
                    {"TTFT reuse off", "ms"},
                    {"speed-up", "x"},
                    {"new tokens alone", "ms"},
                    {"TTFT / new alone", "x"}});
  ChartSpec chart{
      ChartKind::kLine, "Chat: TTFT per turn", "turn", "TTFT (ms)", {}, {{"reuse on", {}}}, {}};
  if (replay) chart.series.push_back({"reuse off", {}});
  std::vector<double> later_hits;
  std::vector<double> later_over_alone;  // turns 2-8: each turn's median of its pairs' ratios
  for (int turn = 0; turn < kTurns; ++turn) {
    const double on_ms = Median(ttft[turn]) * 1e3;
    const double off_ms = off_ttft[turn] * 1e3;
    const bool paired = replay && turn > 0;
    const double alone_ms = paired ? Median(new_alone_ttft[turn]) * 1e3 : 0.0;
    const double over_alone = paired ? Median(ttft_over_alone[turn]) : 0.0;
    table.AddRow({turn + 1, prompt_tokens[turn], cached_tokens[turn],
                  BenchCell(100.0 * Median(hit[turn]), 1), BenchCell(on_ms, 1),
                  replay ? BenchCell(off_ms, 1) : BenchCell(),
                  replay ? BenchCell(Ratio(off_ms, on_ms), 1) : BenchCell(),
                  paired ? BenchCell(alone_ms, 1) : BenchCell(),
                  paired ? BenchCell(over_alone, 2) : BenchCell()});
    if (paired) later_over_alone.push_back(over_alone);
    chart.categories.push_back(std::to_string(turn + 1));
    chart.series[0].values.push_back(on_ms);
    if (replay) chart.series[1].values.push_back(off_ms);
    if (turn > 0) later_hits.insert(later_hits.end(), hit[turn].begin(), hit[turn].end());
  }
  const double last_on = Median(ttft[kTurns - 1]) * 1e3;
  result.figures = {
      BenchFigure::Plain("first_turn_ttft_ms", "turn 1 TTFT", Median(ttft[0]) * 1e3, "ms"),
      BenchFigure::Plain("last_turn_ttft_ms", "turn 8 TTFT", last_on, "ms"),
      BenchFigure::Plain("later_turns_hit_rate", "hit rate, turns 2-8", 100.0 * Mean(later_hits),
                         "%")};
  if (replay) {
    result.figures.push_back(BenchFigure::Plain("last_turn_speedup",
                                                "turn 8 speed-up over reuse off",
                                                Ratio(off_ttft[kTurns - 1] * 1e3, last_on), "x"));
    // The target: reuse adds at most 10% to the prefill of a turn's new tokens. Each turn's own
    // ratio (the median of its pairs), then their median: turns add different numbers of
    // tokens, so a median TTFT and a median new-tokens time may come from different turns.
    result.figures.push_back(BenchFigure::AtMost(
        "later_turns_over_new_tokens_alone",
        "turns 2-8, median of each turn's TTFT / prefill of its new tokens alone",
        Median(later_over_alone), "x", 1.1));
  }
  result.tables.push_back(std::move(table));
  result.charts.push_back(std::move(chart));
  result.notes = {
      "a turn's prompt = the previous prompt + its generated answer (as text, re-tokenized) + a "
      "new "
      "user message; hit rate = cached tokens / prompt tokens",
      replay ? "reuse off: the first conversation's prompts sent again to an engine with prefix "
               "caching off (one run per turn); new tokens alone: the tokens a warm turn computed, "
               "sent alone right after it to the same engine (the same prefill without the cached "
               "context, from positions that match no cached block), in every conversation; "
               "TTFT / new alone: the median of each conversation's pair"
             : "reuse off is not measured against a server (its setting is the server's)"};
  return result;
}

}  // namespace reprise::bench
