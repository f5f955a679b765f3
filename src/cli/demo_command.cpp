// `reprise demo`: the main job shown with nothing but the binary. Makes the demo model once (see
// demo_model.h), then runs the three reuse scenarios of the seeds through the engine: a long
// document with several questions (vLLM's and NIM's examples), a multi-turn chat, and static
// task prompts chosen by task_id (rtp-llm's MultiTaskPrompt); prints cold against warm TTFT and
// cached tokens as a table, and draws them as an SVG chart with --chart.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/svg.h"
#include "bench/table.h"
#include "bench/texts.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "modelgen/make_model.h"
#include "reprise/engine.h"

namespace reprise::cli {
namespace {

using bench::BenchCell;
using bench::BenchTable;
using bench::ChartSpec;

struct DemoOptions {
  bool quick = false;
  std::string shape = "135m";
  std::string chart_path;
  int threads = 0;
};

// One measured request: the first of its scenario is cold, the others may reuse its blocks.
struct DemoRow {
  std::string scenario;
  std::string label;
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;
  double ttft_ms = 0;
  bool cold = false;
};

class DemoRun {
 public:
  DemoRun(Engine& engine, int max_tokens) : engine_(engine), max_tokens_(max_tokens) {}

  // Runs `request` to its end and records it; returns the generated text.
  std::string Measure(const std::string& scenario, const std::string& label, bool cold,
                      GenerationRequest request) {
    request.sampling.temperature = 0;
    request.sampling.max_tokens = max_tokens_;
    request.sampling.ignore_eos = true;  // the same work on every run
    std::vector<GenerationRequest> batch;
    batch.push_back(std::move(request));
    GenerationOutput output = engine_.Generate(std::move(batch)).at(0);
    if (output.finish_reason == FinishReason::kError) throw Error(output.error);
    rows_.push_back({scenario, label, output.prompt_tokens, output.cached_tokens,
                     output.ttft_seconds * 1e3, cold});
    return output.text;
  }

  const std::vector<DemoRow>& rows() const { return rows_; }

 private:
  Engine& engine_;
  int max_tokens_;
  std::vector<DemoRow> rows_;
};

GenerationRequest TextRequest(std::string prompt) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  return request;
}

// vLLM's and NIM's example: one long markdown table, then questions about it.
void LongDocument(DemoRun& run, int rows) {
  const std::string document = bench::TableDocument(rows);
  const int questions[][2] = {{1, 0}, {std::min(28, rows), 0}, {2, 1}, {std::min(13, rows), 2}};
  bool cold = true;
  for (const auto& [row, kind] : questions) {
    run.Measure("long document", cold ? "question 1" : "next question", cold,
                TextRequest(document + bench::TableQuestion(row, kind)));
    cold = false;
  }
}

// A conversation: each turn sends the whole history again, with the model's last answer.
void MultiTurnChat(DemoRun& run, Engine& engine) {
  const char* user_turns[] = {
      "Hello! Can you help me plan a short trip to the mountains this weekend? I like hiking, "
      "but nothing too hard, and I would like a warm place to sleep.",
      "What should I pack for two days?", "And what is the weather usually like there in October?"};
  std::vector<Engine::ChatMessage> messages = {
      {"system", "You are a helpful travel assistant. Answer briefly and practically."}};
  int turn = 0;
  for (const char* text : user_turns) {
    messages.push_back({"user", text});
    GenerationRequest request = TextRequest(engine.ApplyChatTemplate(messages));
    request.add_special_tokens = false;  // the template wrote what the model expects
    // A salt of its own: the first turn must not reuse the pinned task prompt, whose first
    // tokens ("<|im_start|>system\nYou are a ...") the chat's system message shares.
    request.cache.cache_salt = "demo-chat";
    ++turn;
    std::string answer =
        run.Measure("multi-turn chat", fmt::format("turn {}", turn), turn == 1, std::move(request));
    messages.push_back({"assistant", answer});
  }
}

// rtp-llm's MultiTaskPrompt: a long system prompt computed and pinned at start-up, prepended to
// a request that names its task_id.
constexpr const char* kTaskId = "1";
std::string TaskPrompt(size_t words) {
  return "<|im_start|>system\nYou are a careful assistant for a support team. Read the "
         "question, think about what the customer needs, and answer in plain words. Notes: " +
         bench::Prose(7, words) + "<|im_end|>\n<|im_start|>";
}

void StaticTaskPrompt(DemoRun& run, const std::string& task_prompt) {
  const char* questions[] = {"hello, what's your name?",
                             "hello, what's your name? how old are you?"};
  auto question = [](const char* text) {
    return fmt::format("user\n{}<|im_end|>\n<|im_start|>assistant\n", text);
  };
  // Cold: the task prompt's text sent in the request itself, under a salt of its own so that it
  // cannot share the pinned blocks.
  GenerationRequest cold = TextRequest(task_prompt + question(questions[0]));
  cold.cache.cache_salt = "demo-cold";
  run.Measure("task prompt", "text in request", true, std::move(cold));
  for (const char* text : questions) {
    GenerationRequest warm = TextRequest(question(text));
    warm.cache.task_id = kTaskId;
    run.Measure("task prompt", fmt::format("task_id {}", kTaskId), false, std::move(warm));
  }
}

BenchTable ResultTable(const std::vector<DemoRow>& rows) {
  BenchTable table("Time to first token, cold (nothing cached) against warm (a prefix reused)",
                   {{"scenario", ""},
                    {"request", ""},
                    {"prompt", "tokens"},
                    {"cached", "tokens"},
                    {"TTFT", "ms"},
                    {"vs cold", "x faster"}});
  double cold_ms = 0;
  for (const DemoRow& row : rows) {
    if (row.cold) cold_ms = row.ttft_ms;
    BenchCell speedup =
        row.cold || row.ttft_ms <= 0 ? BenchCell() : BenchCell(cold_ms / row.ttft_ms);
    table.AddRow({row.scenario, row.label, row.prompt_tokens, row.cached_tokens,
                  BenchCell(row.ttft_ms, 1), speedup});
  }
  return table;
}

// One bar chart per scenario: the cold request's bar beside the warm ones'.
std::vector<ChartSpec> ResultCharts(const std::vector<DemoRow>& rows) {
  std::vector<ChartSpec> charts;
  for (const DemoRow& row : rows) {
    if (charts.empty() || charts.back().title != row.scenario) {
      ChartSpec chart;
      chart.title = row.scenario;
      chart.x_label = "request";
      chart.y_label = "TTFT (ms)";
      chart.series = {{"cold", {}}, {"warm", {}}};
      charts.push_back(std::move(chart));
    }
    ChartSpec& chart = charts.back();
    chart.categories.push_back(row.label);
    const double none = std::numeric_limits<double>::quiet_NaN();
    chart.series[0].values.push_back(row.cold ? row.ttft_ms : none);
    chart.series[1].values.push_back(row.cold ? none : row.ttft_ms);
  }
  return charts;
}

int RunDemo(const DemoOptions& options) {
  const std::string shape = options.quick ? "tiny" : options.shape;
  std::string model = EnsureDemoModel(shape, options.threads);
  std::printf("Demo model: %s\n%s\n\n", model.c_str(), kDemoWeightsNotice);
  std::fflush(stdout);

  // The seeds' sizes: vLLM's 30-row table; a task prompt of a few hundred tokens.
  const int table_rows = options.quick ? 12 : 30;
  const size_t task_words = options.quick ? 40 : 150;
  const std::string task_prompt = TaskPrompt(task_words);

  EngineConfig config;
  config.model_path = model;
  config.num_threads = options.threads;
  config.kv_cache_memory_bytes = options.quick ? (size_t{64} << 20) : (size_t{512} << 20);
  config.task_prompts_json =
      nlohmann::json::array({{{"task_id", kTaskId}, {"prompt", task_prompt}}}).dump();
  Engine engine(config);

  // One short request first, so that no measured request pays for first-touch page faults of
  // the weights or the thread pool's start.
  std::vector<GenerationRequest> warm_up(1, TextRequest("Hello"));
  warm_up[0].sampling.max_tokens = 2;
  engine.Generate(std::move(warm_up));
  engine.ClearCache();

  DemoRun run(engine, options.quick ? 2 : 8);
  LongDocument(run, table_rows);
  engine.ClearCache();  // each scenario starts cold
  MultiTurnChat(run, engine);
  engine.ClearCache();
  StaticTaskPrompt(run, task_prompt);

  BenchTable table = ResultTable(run.rows());
  std::printf("%s\n", table.ToText().c_str());
  double cold_total = 0, warm_total = 0;
  size_t warm_prompt = 0, warm_cached = 0;
  int colds = 0, warms = 0;
  for (const DemoRow& row : run.rows()) {
    if (row.cold) {
      cold_total += row.ttft_ms;
      ++colds;
    } else {
      warm_total += row.ttft_ms;
      warm_prompt += row.prompt_tokens;
      warm_cached += row.cached_tokens;
      ++warms;
    }
  }
  if (colds > 0 && warms > 0 && warm_total > 0) {
    std::printf(
        "Warm requests reused %.0f%% of their prompt tokens; their mean TTFT was %.1fx "
        "shorter than the cold ones'.\n",
        warm_prompt > 0
            ? 100.0 * static_cast<double>(warm_cached) / static_cast<double>(warm_prompt)
            : 0.0,
        (cold_total / colds) / (warm_total / warms));
  }
  if (!options.chart_path.empty()) {
    std::ofstream file(options.chart_path);
    file << bench::RenderSvg(ResultCharts(run.rows()));
    if (!file) throw Error(fmt::format("cannot write the chart to '{}'", options.chart_path));
    std::printf("Chart: %s\n", options.chart_path.c_str());
  }
  std::printf("Next: `reprise serve --demo` serves this model over an OpenAI-compatible API.\n");
  return 0;
}

}  // namespace

void RegisterDemoCommand(CLI::App& app, CommandAction& run) {
  auto options = std::make_shared<DemoOptions>();
  auto* command = app.add_subcommand(
      "demo", "Show prefix reuse on a random-weight model made once, with nothing but this binary");
  command->add_flag("--quick", options->quick, "a tiny model and small prompts (seconds)");
  command->add_option("--shape", options->shape,
                      "shape of the demo model: " + modelgen::ShapeNames());
  command->add_option("--chart", options->chart_path,
                      "draw the TTFT figures as an SVG chart to FILE");
  command->add_option("-t,--threads", options->threads, "kernel threads (0: every core)");
  command->callback([options, &run] { run = [options] { return RunDemo(*options); }; });
}

}  // namespace reprise::cli
