// What every benchmark workload gets: the validated options, the model, the progress display,
// and a way to make targets (engines with chosen settings, or the --url server).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bench/options.h"
#include "bench/progress.h"
#include "bench/target.h"
#include "core/error.h"
#include "reprise/engine.h"

namespace reprise::bench {

// A workload that cannot fit the model's context (see BenchContext::FitToContext).
class ContextTooSmall : public Error {
 public:
  using Error::Error;
};

class BenchContext {
 public:
  // `model_path` is -m or the model --make-model wrote (empty with --url and no -m).
  BenchContext(BenchOptions options, std::string model_path, BenchProgress& progress);

  const BenchOptions& options() const { return options_; }
  const std::string& model_path() const { return model_path_; }
  BenchProgress& progress() const { return progress_; }
  bool remote() const { return !options_.url.empty(); }
  bool quick() const { return options_.quick; }
  int repeat() const { return options_.repeat; }
  // `normal` for a full run, `quick` with --quick.
  template <typename T>
  T Pick(T normal, T quick) const {
    return options_.quick ? quick : normal;
  }

  // Where requests go: with --url the server (its own settings; the arguments are ignored),
  // else a fresh engine on the model with prefix caching on or off and a KV budget of
  // `kv_cache_bytes` (0: --kv-cache-memory, or 1 GiB when that is not given either).
  // `kv_disk_path` (when not empty) gives the engine a disk tier there instead of --kv-disk-path.
  std::unique_ptr<BenchTarget> MakeTarget(bool prefix_caching, size_t kv_cache_bytes = 0,
                                          const std::string& kv_disk_path = "") const;
  // The engine settings MakeTarget uses in process, for workloads that drive an Engine directly.
  EngineConfig EngineConfigFor(bool prefix_caching, size_t kv_cache_bytes = 0,
                               const std::string& kv_disk_path = "") const;

  // KV bytes one token takes in this model (all layers, K and V, --kv-type), read from the model
  // file; 0 with --url and no model.
  size_t KvBytesPerToken() const;

  // A text seed moved by --seed, so that another run's prompts share nothing with this one's
  // (a server keeps its cache between runs).
  uint64_t Seed(uint64_t local) const { return local + options_.seed * 1'000'000; }

  // The model's context length in tokens, read from the model file; 0 with --url and no -m
  // (the server then refuses what does not fit, with its own message).
  int64_t ContextLength() const;

  // `wanted` tokens for the part of a prompt a workload sizes, or fewer so that it and
  // `reserve` more tokens (questions, later turns, generated tokens) fit the model's context.
  // Throws ContextTooSmall naming the workload and the context when fewer than `minimum` are
  // left.
  size_t FitToContext(const std::string& workload, size_t wanted, size_t reserve,
                      size_t minimum) const;

  // Kernel threads the run uses: --threads, or every core.
  int threads() const;

 private:
  BenchOptions options_;
  std::string model_path_;
  BenchProgress& progress_;
};

// Runs a short request so that weights are paged in and scratch buffers exist before timing;
// then empties the cache where it can.
void WarmUp(BenchTarget& target);

// Prose (see Prose) of as many words as fit in `tokens` prompt tokens on `target`.
std::string FitProse(BenchTarget& target, uint64_t seed, size_t tokens);

}  // namespace reprise::bench
