// The settings of one `reprise bench` run, as parsed from the command line, and their checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace reprise::bench {

struct BenchOptions {
  std::string workload;          // one of BenchWorkloadNames()
  std::string model;             // -m: GGUF model file
  std::string make_model_shape;  // --make-model: write a temporary random-weight model instead
  std::string make_model_type = "q8_0";
  std::string vocab_path;  // --vocab-from for --make-model (default: the fixtures' vocab)
  int threads = 0;         // 0: every core
  int block_size = 16;
  std::string kv_cache_memory;  // "" : the engine's default (workloads may set their own)
  std::string kv_type = "f16";
  bool mmap_weights = false;  // --mmap: weights in the file's memory map
  std::string kv_disk_path;   // "" : no disk tier
  std::string kv_disk_size;   // "" : no cap
  std::string schedule_policy = "cache-aware";
  std::string eviction_policy = "scan-resistant";
  int max_batch_tokens = 512;
  int max_running_requests = 64;
  int repeat = 3;  // measured repetitions of each case (medians are reported)
  std::string json_path;
  std::string chart_path;
  bool quick = false;        // small sizes: the whole run takes seconds (smoke tests)
  std::string url;           // an OpenAI-compatible server instead of the in-process engine
  std::string served_model;  // the "model" field sent to --url ("": the first of /v1/models)
  uint64_t seed = 0;         // shifts every prompt text (a server keeps its cache across runs)
  std::string cpu_target;    // kernels: scalar, avx2 or avx512 (default: the best one)
  // side-channel and soak (security.h), against --url only:
  std::string victim_key;
  std::string attacker_key;
  std::string api_key;            // soak: sent with every request
  int probes = 40;                // side-channel: probes of each kind
  int prompt_words = 200;         // side-channel: words per secret
  double max_auc = 0;             // side-channel: > 0: exit 1 above it
  double duration_seconds = 600;  // soak
  int clients = 32;               // soak
};

// "kernels", "prefill", "decode", "doc", "chat", "multidoc", "unique", "concurrent", "tiers",
// "sched", "all", and the security benchmarks "side-channel" and "soak" (not part of "all";
// --url only).
const std::vector<std::string>& BenchWorkloadNames();

// Whether a workload drives an engine (in process or at --url); "kernels" does not.
bool WorkloadNeedsEngine(const std::string& workload);
// Whether a workload can run against --url; "kernels" and "sched" (engine internals) cannot.
bool RunsOverHttp(const std::string& workload);

// Throws Error with a message for the user when the options do not make a runnable benchmark:
// an unknown workload, no model for an engine workload, --url with kernels, a malformed URL,
// a non-positive repeat or thread count, both -m and --make-model.
void ValidateBenchOptions(const BenchOptions& options);

// Host and port of an http:// URL ("http://127.0.0.1:8080" -> {"127.0.0.1", 8080}); a missing
// port is 80. Throws Error for anything else (https, a path other than "/", a bad port).
struct HostPort {
  std::string host;
  int port = 80;
};
HostPort ParseHttpUrl(const std::string& url);

// The vocabulary --make-model copies when --vocab-from is not given: one of the real model's
// size (SmolLM2's 49,152 tokens for 135m and 360m, Llama 3's 128,256 otherwise).
const char* DefaultVocab(const std::string& shape);
// The help text's account of DefaultVocab.
std::string DefaultVocabHelp();

// Runs `options.workload` (every workload for "all"): prints each table, writes --json and
// --chart, and returns the exit code. Throws Error for options that make no runnable benchmark.
int RunBench(const BenchOptions& options);

}  // namespace reprise::bench
