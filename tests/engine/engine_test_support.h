// Shared set-up for engine tests: a tiny random-weight model with a real vocabulary (written once
// per test binary), engine configs, and bit-exact comparison of outputs.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "kernels/cpu_target.h"
#include "modelgen/make_model.h"
#include "reprise/engine.h"
#include "test_support.h"

namespace reprise::testing {

// A "tiny"-shape model (2 layers, 64 wide, context 2048) with the Llama 3 vocabulary, in `type`,
// of architecture `architecture` (llama, or qwen2 with NeoX rope and Q/K/V biases). K-quants take
// the "tiny-k" shape (256 wide), whose rows hold their super-blocks.
inline std::string TinyModelPath(kernels::WeightType type = kernels::WeightType::kF16,
                                 const std::string& architecture = "llama") {
  auto path = ScratchDir() /
              ("tiny_" + architecture + "_" + std::string(kernels::WeightTypeName(type)) + ".gguf");
  if (!std::filesystem::exists(path)) {
    modelgen::MakeModelOptions options;
    options.shape = kernels::BlockElements(type) == 256 ? "tiny-k" : "tiny";
    options.architecture = architecture;
    options.vocab_path = Fixture("vocab/ggml-vocab-llama-bpe.gguf");
    options.type = type;
    options.output_path = path.string();
    options.threads = 2;
    modelgen::MakeModel(options);
  }
  return path.string();
}

inline EngineConfig TestConfig(const std::string& model, bool reuse, int max_batch_tokens = 512,
                               int threads = 1) {
  EngineConfig config;
  config.model_path = model;
  config.enable_prefix_caching = reuse;
  config.max_batch_tokens = max_batch_tokens;
  config.num_threads = threads;
  config.kv_cache_memory_bytes = size_t{64} << 20;
  return config;
}

inline GenerationRequest Greedy(std::string prompt, int max_tokens = 8) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling.temperature = 0;
  request.sampling.max_tokens = max_tokens;
  request.sampling.ignore_eos = true;
  request.record_logits = true;
  return request;
}

inline GenerationRequest GreedyTokens(std::vector<int32_t> tokens, int max_tokens = 8) {
  GenerationRequest request = Greedy("", max_tokens);
  request.prompt_tokens = std::move(tokens);
  return request;
}

// Same tokens and the same logits to the bit at every generated position.
inline void ExpectBitIdentical(const GenerationOutput& expected, const GenerationOutput& actual,
                               const std::string& what) {
  ASSERT_EQ(expected.token_ids, actual.token_ids) << what;
  ASSERT_EQ(expected.logits.size(), actual.logits.size()) << what;
  for (size_t i = 0; i < expected.logits.size(); ++i) {
    ASSERT_EQ(expected.logits[i].size(), actual.logits[i].size()) << what;
    ASSERT_EQ(std::memcmp(expected.logits[i].data(), actual.logits[i].data(),
                          expected.logits[i].size() * sizeof(float)),
              0)
        << what << ": logits of generated position " << i << " differ";
  }
}

// The engine publishes statistics after each step; wait until no block is referenced.
// (`engine`: a reprise::Engine or anything with the same Stats()).
template <typename WithStats>
EngineStats WaitForIdle(const WithStats& engine) {
  EngineStats stats = engine.Stats();
  for (int i = 0; i < 500 && (stats.blocks_in_use > 0 || stats.requests_running > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    stats = engine.Stats();
  }
  return stats;
}

inline std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(REPRISE_SOURCE_DIR) + "/tests/data/" + name);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The exactness tests run again under REPRISE_CPU_TARGET=avx2 and =scalar (tests/CMakeLists.txt).
// Where the named target is the one this CPU picks anyway (avx2 without AVX-512), or one it lacks
// (then it runs its best), that run repeats the plain one: the reason to skip it, or nothing.
inline std::optional<std::string> TargetRunRepeatsDefault() {
  const char* named = std::getenv("REPRISE_CPU_TARGET");
  if (named == nullptr) return std::nullopt;
  const kernels::CpuTarget highest = kernels::HighestCpuTarget();
  if (kernels::BestCpuTarget() != highest) return std::nullopt;
  return fmt::format(
      "REPRISE_CPU_TARGET={} runs {}, this CPU's best target: the run without it "
      "covers that",
      named, kernels::CpuTargetName(highest));
}

}  // namespace reprise::testing
