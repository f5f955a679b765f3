// `reprise bench WORKLOAD`: the subcommand's options; the benchmark itself is the bench module.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "bench/options.h"
#include "cli/commands.h"
#include "modelgen/make_model.h"

namespace reprise::cli {

void RegisterBenchCommand(CLI::App& app, CommandAction& run) {
  auto options = std::make_shared<bench::BenchOptions>();
  auto* command = app.add_subcommand("bench", "Measure kernels, prefill, decode and prefix reuse");
  std::string workloads;
  for (const auto& name : bench::BenchWorkloadNames())
    workloads += (workloads.empty() ? "" : ", ") + name;
  command->add_option("workload", options->workload, "one of: " + workloads)->required();
  command->add_option("-m,--model", options->model, "GGUF model file or Hugging Face folder");
  command->add_option(
      "--make-model", options->make_model_shape,
      "write a temporary random-weight model of this shape (" + modelgen::ShapeNames() + ")");
  command->add_option("--type", options->make_model_type,
                      "weight type for --make-model (default q8_0)");
  command->add_option("--vocab-from", options->vocab_path,
                      "vocabulary GGUF or Hugging Face folder for --make-model (default: " +
                          bench::DefaultVocabHelp() + ")");
  command->add_option("-t,--threads", options->threads, "kernel threads (0 = all cores)");
  command->add_option("--block-size", options->block_size, "KV positions per block");
  command->add_option(
      "--kv-cache-memory", options->kv_cache_memory,
      "KV cache budget, e.g. 2GiB (default 1GiB; multidoc: about 4 documents' worth)");
  command->add_option("--kv-disk-path", options->kv_disk_path,
                      "keep KV blocks evicted from memory in this folder (the disk tier)");
  command->add_option("--kv-disk-size", options->kv_disk_size,
                      "size cap of --kv-disk-path, e.g. 20GiB (default: no cap)");
  command->add_option("--kv-type", options->kv_type, "f16, f32 or q8 (8-bit codes with scales)");
  AddMmapFlags(*command, [options](bool mmap) { options->mmap_weights = mmap; });
  command->add_option("--max-batch-tokens", options->max_batch_tokens, "tokens per engine step");
  command->add_option("--max-running-requests", options->max_running_requests,
                      "requests computed at once; more wait in the queue (default 64)");
  command->add_option("--schedule-policy", options->schedule_policy,
                      "prefill order: cache-aware (default), lpm (the same) or fcfs");
  command->add_option("--eviction-policy", options->eviction_policy,
                      "which cached blocks go first: scan-resistant (default) or lru");
  command->add_option("--repeat", options->repeat, "measured repetitions of each case (default 3)");
  command->add_option("--json", options->json_path, "write the results as JSON to FILE");
  command->add_option("--chart", options->chart_path, "draw the results as an SVG chart to FILE");
  command->add_flag("--quick", options->quick, "small sizes: the whole run takes seconds");
  command->add_option("--url", options->url,
                      "an OpenAI-compatible server (http://127.0.0.1:PORT) instead of the engine");
  command->add_option("--served-model", options->served_model,
                      "the \"model\" field sent to --url (default: the first of its /v1/models)");
  command->add_option("--seed", options->seed,
                      "shift every prompt text, so that a server's cache from an earlier run "
                      "cannot help (default 0)");
  command->add_option("--cpu-target", options->cpu_target,
                      "kernels: scalar, avx2 or avx512 (default: the best this CPU runs)");
  command->add_option("--victim-key", options->victim_key,
                      "side-channel: the API key of the tenant that sends secret prompts");
  command->add_option("--attacker-key", options->attacker_key,
                      "side-channel: the API key of the tenant that probes for them");
  command->add_option("--probes", options->probes,
                      "side-channel: probes of each kind, hit and miss (default 40)");
  command->add_option("--prompt-words", options->prompt_words,
                      "side-channel: words per secret prompt (default 200)");
  command->add_option("--max-auc", options->max_auc,
                      "side-channel: exit 1 when max(AUC, 1-AUC) of TTFT or cached_tokens is "
                      "above this (default: report only)");
  command->add_option("--duration", options->duration_seconds,
                      "soak: seconds of load (default 600)");
  command->add_option("--clients", options->clients, "soak: concurrent clients (default 32)");
  command->add_option("--api-key", options->api_key,
                      "soak: the key sent with every request (an admin's, so that its cache "
                      "clears act)");
  command->callback([options, &run] { run = [options] { return bench::RunBench(*options); }; });
}

}  // namespace reprise::cli
