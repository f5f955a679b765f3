// `reprise generate`: run prompts through the engine and stream the text, with per-prompt
// figures (prompt tokens, cached tokens, TTFT, prefill and decode speed) on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "reprise/engine.h"

namespace reprise::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_files;
  int max_tokens = 64;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = 0;
  bool no_prefix_caching = false;
  int block_size = 16;
  std::string kv_cache_memory;
  std::string kv_disk_path;
  std::string kv_disk_size;
  std::string kv_type = "f16";
  bool mmap_weights = false;
  int max_batch_tokens = 512;
  int threads = 0;
  bool echo = true;
  bool ignore_eos = false;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read prompt file '{}'", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int RunGenerate(const GenerateOptions& options) {
  std::vector<std::string> prompts = options.prompts;
  for (const auto& path : options.prompt_files) prompts.push_back(ReadFile(path));
  if (prompts.empty()) throw Error("no prompt given (use -p TEXT or --prompt-file FILE)");

  EngineConfig config;
  config.model_path = options.model;
  config.enable_prefix_caching = !options.no_prefix_caching;
  config.block_size = options.block_size;
  config.kv_type = options.kv_type;
  config.mmap_weights = options.mmap_weights;
  config.max_batch_tokens = options.max_batch_tokens;
  config.num_threads = options.threads;
  if (!options.kv_cache_memory.empty())
    config.kv_cache_memory_bytes = ParseByteSize(options.kv_cache_memory);
  if (!options.kv_disk_size.empty() && options.kv_disk_path.empty()) {
    throw Error("--kv-disk-size needs --kv-disk-path");
  }
  config.kv_disk_path = options.kv_disk_path;
  if (!options.kv_disk_size.empty())
    config.kv_disk_size_bytes = ParseByteSize(options.kv_disk_size);
  Engine engine(config);

  SamplingParams sampling;
  sampling.max_tokens = options.max_tokens;
  sampling.temperature = options.temperature;
  sampling.top_k = options.top_k;
  sampling.top_p = options.top_p;
  sampling.min_p = options.min_p;
  sampling.repetition_penalty = options.repetition_penalty;
  sampling.frequency_penalty = options.frequency_penalty;
  sampling.presence_penalty = options.presence_penalty;
  sampling.seed = options.seed;
  sampling.ignore_eos = options.ignore_eos;

  // Prompts run one after another, as a user would send them, so each can reuse the ones before.
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (options.echo) {
      std::fputs(prompts[i].c_str(), stdout);
      std::fflush(stdout);
    }
    GenerationRequest request;
    request.prompt = prompts[i];
    request.sampling = sampling;
    std::promise<GenerationOutput> done;
    StreamCallbacks callbacks;
    callbacks.on_token = [](const TokenEvent& event) {
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      std::fflush(stdout);
    };
    callbacks.on_finish = [&done](const GenerationOutput& output) { done.set_value(output); };
    engine.Submit(std::move(request), std::move(callbacks));
    GenerationOutput output = done.get_future().get();
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (output.finish_reason == FinishReason::kError) throw Error(output.error);
    size_t computed = output.prompt_tokens - output.cached_tokens;
    double decode_seconds = output.total_seconds - output.ttft_seconds;
    size_t decoded = output.token_ids.size() > 0 ? output.token_ids.size() - 1 : 0;
    std::fprintf(
        stderr,
        "[prompt %zu] prompt tokens: %zu, cached tokens: %zu (memory %zu, disk %zu), "
        "TTFT: %.1f ms (compute %.1f ms), prefill: %.1f tok/s, decode: %.1f tok/s (%zu "
        "tokens, %s)\n",
        i + 1, output.prompt_tokens, output.cached_tokens, output.cache_sources.memory,
        output.cache_sources.disk, output.ttft_seconds * 1e3, output.prefill_compute_seconds * 1e3,
        output.ttft_seconds > 0 ? static_cast<double>(computed) / output.ttft_seconds : 0.0,
        decode_seconds > 0 ? static_cast<double>(decoded) / decode_seconds : 0.0,
        output.token_ids.size(), FinishReasonName(output.finish_reason));
  }
  return 0;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, CommandAction& run) {
  auto options = std::make_shared<GenerateOptions>();
  auto* command = app.add_subcommand("generate", "Generate text from one or more prompts");
  command->add_option("-m,--model", options->model, "GGUF model file or Hugging Face folder")
      ->required();
  command->add_option("-p,--prompt", options->prompts, "prompt text (repeat for several prompts)");
  command->add_option("--prompt-file", options->prompt_files, "file holding a prompt (repeatable)");
  command->add_option("-n,--max-tokens", options->max_tokens, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--temp,--temperature", options->temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  command->add_option("--top-k", options->top_k, "0 = no limit")->check(CLI::NonNegativeNumber);
  command->add_option("--top-p", options->top_p)->check(CLI::Range(0.0, 1.0));
  command->add_option("--min-p", options->min_p)->check(CLI::Range(0.0, 1.0));
  command->add_option("--repetition-penalty,--repeat-penalty", options->repetition_penalty);
  command->add_option("--frequency-penalty", options->frequency_penalty);
  command->add_option("--presence-penalty", options->presence_penalty);
  command->add_option("--seed", options->seed);
  command->add_flag("--no-enable-prefix-caching", options->no_prefix_caching,
                    "turn prefix reuse off");
  command->add_option("--block-size", options->block_size, "KV positions per block");
  command->add_option("--kv-cache-memory", options->kv_cache_memory, "KV cache budget, e.g. 2GiB");
  command->add_option(
      "--kv-disk-path", options->kv_disk_path,
      "keep KV blocks in this folder beyond memory and across runs (the disk tier)");
  command->add_option("--kv-disk-size", options->kv_disk_size,
                      "size cap of --kv-disk-path, e.g. 20GiB (default: no cap)");
  command->add_option("--kv-type", options->kv_type, "f16, f32 or q8 (8-bit codes with scales)");
  AddMmapFlags(*command, [options](bool mmap) { options->mmap_weights = mmap; });
  command->add_option("--max-batch-tokens", options->max_batch_tokens)->check(CLI::PositiveNumber);
  command->add_option("-t,--threads", options->threads, "kernel threads (0 = all cores)");
  command->add_flag("!--no-echo", options->echo, "do not print the prompt before the output");
  command->add_flag("--ignore-eos", options->ignore_eos, "keep generating past end-of-text");
  command->callback([options, &run] { run = [options] { return RunGenerate(*options); }; });
}

}  // namespace reprise::cli
