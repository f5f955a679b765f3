// `bench doc`: a long document (the seed's table grown to ~6,000 tokens) then 5 questions about
// it: cold TTFT (nothing cached), warm TTFT (document cached), the time to prefill only the
// question with the document cached (the engine's forward time for the uncached suffix), and
// the question as a prompt of its own, as ratios measured in one run.
#include <fmt/format.h>

#include "bench/stats.h"
#include "bench/texts.h"
#include "bench/workloads.h"

namespace reprise::bench {

namespace {

constexpr int kQuestions = 5;

// A line that opens repeat r's copy of the document, so that every repeat starts cold.
std::string DocumentOpening(const BenchContext& context, int r) {
  return fmt::format("Document {} of the benchmark (seed {}).\n", r + 1, context.options().seed);
}

// The row the i-th question of repeat r asks about: spread over the table, never the same twice.
int QuestionRow(int i, int r, int rows) {
  return 1 + (rows * (2 * i + 1) / (2 * kQuestions) + 7 * r) % rows;
}

}  // namespace

WorkloadResult RunDocWorkload(const BenchContext& context) {
  WorkloadResult result;
  result.name = "doc";
  // Beside the document: its opening line, a question (under 40 tokens) and the answer token.
  const size_t doc_tokens = context.FitToContext("doc", context.Pick<size_t>(6000, 600), 64, 128);
  const int repeat = context.repeat();
  BenchProgress& progress = context.progress();
  progress.Begin("doc", 2 + repeat * (kQuestions + kQuestions - 1));
  progress.Step("loading the models, warm-up");
  std::unique_ptr<BenchTarget> cached = context.MakeTarget(/*prefix_caching=*/true);
  WarmUp(*cached);
  // The question alone: in process a second engine with reuse off computes exactly the tokens
  // the warm request computes (its uncached suffix), at positions from 0; a server gets the
  // question's text alone.
  std::unique_ptr<BenchTarget> alone = context.MakeTarget(/*prefix_caching=*/false);
  WarmUp(*alone);
  progress.Step("sizing the document");
  FittedText table =
      FitToTokens([](size_t rows) { return TableDocument(static_cast<int>(rows)); }, doc_tokens,
                  [&](const std::string& text) { return cached->CountTokens(text); }, 2000);
  const int rows = static_cast<int>(table.units);

  // [question][repeat]
  std::vector<std::vector<double>> ttft(kQuestions), alone_ttft(kQuestions);
  std::vector<double> warm_compute;  // forward time of each warm request's uncached suffix
  std::vector<size_t> prompt_tokens(kQuestions), cached_tokens(kQuestions),
      alone_tokens(kQuestions);
  for (int r = 0; r < repeat; ++r) {
    const std::string document = DocumentOpening(context, r) + table.text;
    std::vector<BenchRequest> suffixes;
    for (int i = 0; i < kQuestions; ++i) {
      progress.Step(fmt::format("run {}: {} question {}", r + 1, i == 0 ? "cold" : "warm", i + 1));
      const std::string question = TableQuestion(QuestionRow(i, r, rows), i);
      BenchRequest request;
      request.prompt = document + question;
      request.max_tokens = 1;
      BenchResult run = cached->Run(request);
      ttft[i].push_back(run.ttft_seconds);
      prompt_tokens[i] = run.prompt_tokens;
      cached_tokens[i] = run.cached_tokens.value_or(0);
      if (i == 0) continue;
      if (run.prefill_compute_seconds) warm_compute.push_back(*run.prefill_compute_seconds);
      BenchRequest suffix;
      suffix.max_tokens = 1;
      if (cached->in_process()) {
        std::vector<int32_t> tokens = cached->Tokenize(request.prompt);
        size_t from = std::min(cached_tokens[i], tokens.size() - 1);
        suffix.prompt_tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(from),
                                    tokens.end());
      } else {
        suffix.prompt = question;
      }
      suffixes.push_back(std::move(suffix));
    }
    for (int i = 1; i < kQuestions; ++i) {
      progress.Step(fmt::format("run {}: question {} alone", r + 1, i + 1));
      BenchResult run = alone->Run(suffixes[i - 1]);
      alone_ttft[i].push_back(run.ttft_seconds);
      alone_tokens[i] = run.prompt_tokens;
    }
  }
  progress.End();

  BenchTable questions(
      fmt::format("[doc] {}-token document ({} table rows), then 5 questions (TTFT p50 of {} runs)",
                  table.tokens, rows, repeat),
      {{"question", ""},
       {"prompt", "tokens"},
       {"cached", "tokens"},
       {"TTFT", "ms"},
       {"alone", "tokens"},
       {"alone TTFT", "ms"},
       {"TTFT / alone", "x"}});
  ChartSpec chart{ChartKind::kBar,
                  "Long document, 5 questions",
                  "question",
                  "TTFT (ms)",
                  {},
                  {{"with document", {}}, {"question alone", {}}},
                  {}};
  std::vector<double> warm, warm_alone;
  for (int i = 0; i < kQuestions; ++i) {
    const double median = Median(ttft[i]) * 1e3;
    const double median_alone = i == 0 ? std::nan("") : Median(alone_ttft[i]) * 1e3;
    questions.AddRow({fmt::format("{} ({})", i + 1, i == 0 ? "cold" : "warm"), prompt_tokens[i],
                      cached_tokens[i], BenchCell(median, 1),
                      i == 0 ? BenchCell() : BenchCell(alone_tokens[i]),
                      i == 0 ? BenchCell() : BenchCell(median_alone, 1),
                      i == 0 ? BenchCell() : BenchCell(median / median_alone, 2)});
    chart.categories.push_back(fmt::format("{} ({})", i + 1, i == 0 ? "cold" : "warm"));
    chart.series[0].values.push_back(median);
    chart.series[1].values.push_back(median_alone);
    if (i > 0) {
      warm.insert(warm.end(), ttft[i].begin(), ttft[i].end());
      warm_alone.insert(warm_alone.end(), alone_ttft[i].begin(), alone_ttft[i].end());
    }
  }
  const double cold_ms = Median(ttft[0]) * 1e3;
  const double warm_ms = Median(warm) * 1e3;
  const double alone_ms = Median(warm_alone) * 1e3;
  BenchTable summary(
      "[doc] summary",
      {{"case", ""}, {"TTFT p50", "ms"}, {"vs cold", "x"}, {"vs question alone", "x"}});
  summary.AddRow({"cold (document + question 1)", BenchCell(cold_ms, 1), BenchCell(1.0, 2),
                  BenchCell(Ratio(cold_ms, alone_ms), 2)});
  summary.AddRow({"warm (questions 2-5, document cached)", BenchCell(warm_ms, 1),
                  BenchCell(Ratio(warm_ms, cold_ms), 3), BenchCell(Ratio(warm_ms, alone_ms), 2)});
  summary.AddRow({cached->in_process() ? "question alone (reuse off)" : "question alone",
                  BenchCell(alone_ms, 1), BenchCell(Ratio(alone_ms, cold_ms), 3),
                  BenchCell(1.0, 2)});
  const double compute_ms = warm_compute.empty() ? std::nan("") : Median(warm_compute) * 1e3;
  if (!warm_compute.empty()) {
    summary.AddRow({"question prefill, document cached (compute)", BenchCell(compute_ms, 1),
                    BenchCell(Ratio(compute_ms, cold_ms), 3),
                    BenchCell(Ratio(compute_ms, alone_ms), 2)});
  }
  result.tables = {std::move(questions), std::move(summary)};
  result.figures = {
      BenchFigure::Plain("cold_ttft_ms", "cold TTFT", cold_ms, "ms"),
      BenchFigure::Plain("warm_ttft_ms", "warm TTFT", warm_ms, "ms"),
      BenchFigure::Plain("question_alone_ttft_ms", "question-alone TTFT", alone_ms, "ms"),
      BenchFigure::Plain("cold_over_warm", "speed-up of warm over cold", Ratio(cold_ms, warm_ms),
                         "x"),
      BenchFigure::Plain("warm_over_question_alone", "warm TTFT / question-alone TTFT",
                         Ratio(warm_ms, alone_ms), "x")};
  if (!warm_compute.empty()) {
    // The target: warm TTFT within 1.1x of prefilling only the question with the
    // document already cached, i.e. reuse adds at most 10% around the compute it cannot avoid.
    result.figures.push_back(BenchFigure::Plain(
        "question_prefill_ms", "question prefill with document cached", compute_ms, "ms"));
    result.figures.push_back(BenchFigure::AtMost("warm_over_question_prefill",
                                                 "warm TTFT / question prefill (doc cached)",
                                                 Ratio(warm_ms, compute_ms), "x", 1.1));
  }
  result.charts.push_back(std::move(chart));
  result.notes = {
      "each run opens the document with its own first line, so its first question is cold; "
      "each question names another row, so no question repeats",
      cached->in_process()
          ? "question alone = the warm prompt's uncached suffix tokens (what the warm request "
            "computes), sent as token ids to a second engine with reuse off: the same tokens at "
            "positions from 0, so it lacks the attention over the cached document"
          : "question alone = the question's text as its own prompt",
      "1 generated token per request: TTFT is the whole request",
      "question prefill (doc cached) = the engine's forward time for the warm request's uncached "
      "suffix, attending to the cached document: the compute that reuse cannot avoid"};
  return result;
}

}  // namespace reprise::bench
