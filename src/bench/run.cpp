// One `reprise bench` run: runs benchmark workloads in process (or against --url), prints their
// tables, and writes JSON (--json) and an SVG chart (--chart).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "bench/context.h"
#include "bench/options.h"
#include "bench/report.h"
#include "bench/security.h"
#include "bench/workloads.h"
#include "core/clock.h"
#include "core/error.h"
#include "gguf/gguf_types.h"
#include "modelgen/make_model.h"

namespace reprise::bench {

namespace {

// A vocabulary of the real model's size: SmolLM2 (135m, 360m) has 49,152 tokens, as StarCoder's
// does; Llama 3.2 (1b) has Llama 3's 128,256. The output matrix is a large part of a small model.
constexpr const char* kSmolVocab = "../shared/fixtures/vocab/ggml-vocab-starcoder.gguf";
constexpr const char* kLlama3Vocab = "../shared/fixtures/vocab/ggml-vocab-llama-bpe.gguf";

using Workload = std::function<WorkloadResult(const BenchContext&)>;

const std::map<std::string, Workload>& Workloads() {
  static const std::map<std::string, Workload> workloads = {
      {"kernels", RunKernelsWorkload},
      {"prefill", [](const BenchContext& context) { return RunSpeedWorkload(context, false); }},
      {"decode", [](const BenchContext& context) { return RunSpeedWorkload(context, true); }},
      {"doc", RunDocWorkload},
      {"chat", RunChatWorkload},
      {"multidoc", RunMultidocWorkload},
      {"tiers", RunTiersWorkload},
      {"unique", RunUniqueWorkload},
      {"concurrent", RunConcurrentWorkload},
      {"sched", RunSchedWorkload},
  };
  return workloads;
}

// A temporary random-weight model for --make-model; removed when the run ends.
class TemporaryModel {
 public:
  TemporaryModel(const BenchOptions& options) {
    auto type = gguf::TypeFromName(options.make_model_type);
    if (!type || !kernels::IsSupportedWeightType(static_cast<uint32_t>(*type))) {
      throw Error(fmt::format("unknown weight type '{}'", options.make_model_type));
    }
    modelgen::MakeModelOptions make;
    make.shape = options.make_model_shape;
    make.type = static_cast<kernels::WeightType>(*type);
    make.vocab_path = options.vocab_path.empty() ? DefaultVocab(make.shape) : options.vocab_path;
    if (options.vocab_path.empty() && !std::filesystem::exists(make.vocab_path)) {
      // No fixtures beside the repository: the built-in vocabulary still gives a working model,
      // but a smaller output matrix than the real model's, so the figures flatter decode.
      spdlog::warn(
          "{} not found: using the built-in vocabulary; pass --vocab-from for a "
          "vocabulary of the real model's size",
          make.vocab_path);
      make.vocab_path.clear();
    }
    make.threads = options.threads;
    path_ = (std::filesystem::temp_directory_path() /
             fmt::format("reprise-bench-{}-{}-{}.gguf", options.make_model_shape,
                         options.make_model_type, ::getpid()))
                .string();
    make.output_path = path_;
    spdlog::info("writing a random-weight {} {} model to {}", make.shape, options.make_model_type,
                 path_);
    modelgen::MakeModel(make);
  }
  ~TemporaryModel() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TemporaryModel(const TemporaryModel&) = delete;
  TemporaryModel& operator=(const TemporaryModel&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

nlohmann::json SettingsJson(const BenchOptions& options, const std::string& model_path) {
  return {{"workload", options.workload},
          {"model", model_path},
          {"make_model",
           options.make_model_shape.empty()
               ? nlohmann::json(nullptr)
               : nlohmann::json(options.make_model_shape + " " + options.make_model_type)},
          {"url", options.url},
          {"threads", options.threads},
          {"block_size", options.block_size},
          {"kv_cache_memory", options.kv_cache_memory},
          {"kv_disk_path", options.kv_disk_path},
          {"kv_disk_size", options.kv_disk_size},
          {"kv_type", options.kv_type},
          {"mmap", options.mmap_weights},
          {"max_batch_tokens", options.max_batch_tokens},
          {"max_running_requests", options.max_running_requests},
          {"schedule_policy", options.schedule_policy},
          {"eviction_policy", options.eviction_policy},
          {"repeat", options.repeat},
          {"seed", options.seed},
          {"quick", options.quick}};
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(fmt::format("cannot write '{}'", path));
}

}  // namespace

const char* DefaultVocab(const std::string& shape) {
  return shape == "135m" || shape == "360m" ? kSmolVocab : kLlama3Vocab;
}

std::string DefaultVocabHelp() {
  return std::string(kSmolVocab) + " for 135m and 360m, " + kLlama3Vocab +
         " otherwise; the built-in vocabulary when that file is absent";
}

int RunBench(const BenchOptions& options) {
  ValidateBenchOptions(options);
  if (options.workload == "side-channel") {
    return RunSideChannelBench({options.url, options.victim_key, options.attacker_key,
                                options.served_model, options.probes, options.prompt_words,
                                options.seed, options.max_auc});
  }
  if (options.workload == "soak") {
    SoakOptions soak;
    soak.url = options.url;
    soak.api_key = options.api_key;
    soak.served_model = options.served_model;
    soak.duration_seconds = options.duration_seconds;
    soak.clients = options.clients;
    soak.seed = options.seed;
    return RunSoakBench(soak);
  }
  std::unique_ptr<TemporaryModel> made;
  std::string model_path = options.model;
  const bool needs_model = WorkloadNeedsEngine(options.workload) && options.url.empty();
  if (!options.make_model_shape.empty() && needs_model) {
    made = std::make_unique<TemporaryModel>(options);
    model_path = made->path();
  }
  BenchProgress progress;
  BenchContext context(options, model_path, progress);

  std::vector<std::string> names;
  if (options.workload == "all") {
    // Validation made sure there is a model or a server; some workloads run in process only.
    for (const auto& name : BenchWorkloadNames()) {
      if (name == "all" || name == "side-channel" || name == "soak" ||
          (!RunsOverHttp(name) && context.remote())) {
        continue;
      }
      names.push_back(name);
    }
  } else {
    names.push_back(options.workload);
  }

  std::vector<WorkloadResult> results;
  std::vector<ChartSpec> charts;
  for (const auto& name : names) {
    Clock::time_point start = Clock::now();
    WorkloadResult result;
    try {
      result = Workloads().at(name)(context);
    } catch (const ContextTooSmall& error) {
      // One workload asked for by name fails with the reason; "all" goes on without it.
      if (names.size() == 1) throw;
      std::fprintf(stdout, "[%s] skipped: %s\n\n", name.c_str(), error.what());
      std::fflush(stdout);
      continue;
    }
    result.seconds = SecondsSince(start);
    std::fputs(WorkloadText(result).c_str(), stdout);
    std::fflush(stdout);
    charts.insert(charts.end(), result.charts.begin(), result.charts.end());
    results.push_back(std::move(result));
  }
  if (results.size() > 1) std::fputs((SummaryTable(results).ToText() + "\n").c_str(), stdout);

  if (!options.json_path.empty()) {
    nlohmann::json machine = DescribeMachine();
    machine["threads_used"] = context.threads();
    WriteFile(options.json_path,
              ReportJson(machine, SettingsJson(options, model_path), results).dump(2) + "\n");
    spdlog::info("wrote {}", options.json_path);
  }
  if (!options.chart_path.empty()) {
    WriteFile(options.chart_path, RenderSvg(charts));
    spdlog::info("wrote {}", options.chart_path);
  }
  return 0;
}

}  // namespace reprise::bench
