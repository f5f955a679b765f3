#include "modelgen/make_model.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <numbers>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "hf/model_source.h"
#include "kernels/matmul.h"
#include "vocabgen/builtin_vocab.h"

namespace reprise::modelgen {

namespace {

// A counter-based generator: each (tensor, row) has its own stream, so the weights do not depend
// on the thread count.
uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately normal (Irwin-Hall of four uniforms), mean 0, standard deviation `stddev`.
void FillNormal(uint64_t seed, float stddev, float* out, int64_t count) {
  uint64_t state = seed;
  const float scale = stddev * std::sqrt(3.0f) / (1u << 23);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t bits = SplitMix(state);
    float sum = 0;
    for (int part = 0; part < 4; ++part) {
      sum +=
          static_cast<float>(static_cast<int32_t>((bits >> (16 * part)) & 0xFFFF) - 32768) * 256.0f;
    }
    out[i] = sum / 2 * scale;
  }
}

uint32_t FileTypeOf(kernels::WeightType type) {
  switch (type) {
    case kernels::WeightType::kF32:
      return 0;
    case kernels::WeightType::kF16:
      return 1;
    case kernels::WeightType::kQ4_0:
      return 2;
    case kernels::WeightType::kQ4_1:
      return 3;
    case kernels::WeightType::kQ8_0:
      return 7;
    case kernels::WeightType::kQ5_0:
      return 8;
    case kernels::WeightType::kQ5_1:
      return 9;
    case kernels::WeightType::kQ4_K:
      return 15;
    case kernels::WeightType::kQ5_K:
      return 17;
    case kernels::WeightType::kQ6_K:
      return 18;
    case kernels::WeightType::kBF16:
      return 32;
  }
  return 1;
}

std::vector<float> Llama3RopeFactors(int rope_dim, float freq_base) {
  // Llama 3.x's rope scaling (factor 32, low 1, high 4, original context 8192), as a tensor of
  // per-frequency divisors.
  constexpr double kFactor = 32, kLow = 1, kHigh = 4, kOriginal = 8192;
  std::vector<float> factors(static_cast<size_t>(rope_dim / 2));
  for (int i = 0; i < rope_dim / 2; ++i) {
    double frequency = 1.0 / std::pow(freq_base, 2.0 * i / rope_dim);
    double wavelength = 2 * std::numbers::pi / frequency;
    double factor;
    if (wavelength < kOriginal / kHigh) {
      factor = 1;
    } else if (wavelength > kOriginal / kLow) {
      factor = kFactor;
    } else {
      double smooth = (kOriginal / wavelength - kLow) / (kHigh - kLow);
      factor = 1.0 / ((1 - smooth) / kFactor + smooth);
    }
    factors[static_cast<size_t>(i)] = static_cast<float>(factor);
  }
  return factors;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace

namespace {

// Every shape make-model writes, by the name users give it.
const std::pair<const char*, ModelShape> kShapes[] = {
    {"135m", {"SmolLM2-135M-shape", 576, 1536, 30, 9, 3, 8192, 100000.0f, false}},
    {"360m", {"SmolLM2-360M-shape", 960, 2560, 32, 15, 5, 8192, 100000.0f, false}},
    {"1b", {"Llama-3.2-1B-shape", 2048, 8192, 16, 32, 8, 131072, 500000.0f, true}},
    {"3b", {"Llama-3.2-3B-shape", 3072, 8192, 28, 24, 8, 131072, 500000.0f, true}},
    {"8b", {"Llama-3.1-8B-shape", 4096, 14336, 32, 32, 8, 131072, 500000.0f, true}},
    {"tiny", {"tiny", 64, 192, 2, 4, 2, 2048, 10000.0f, false}},
    // As tiny, with rows long enough for K-quant super-blocks (multiples of 256).
    {"tiny-k", {"tiny-k", 256, 768, 2, 4, 2, 2048, 10000.0f, false}},
};

}  // namespace

std::string ShapeNames() {
  std::string names;
  const size_t count = std::size(kShapes);
  for (size_t i = 0; i < count; ++i) {
    names += i == 0 ? "" : (i + 1 == count ? " or " : ", ");
    names += kShapes[i].first;
  }
  return names;
}

ModelShape ShapeByName(const std::string& name) {
  for (const auto& [shape_name, shape] : kShapes) {
    if (name == shape_name) return shape;
  }
  throw Error(fmt::format("unknown model shape '{}' ({})", name, ShapeNames()));
}

void MakeModel(const MakeModelOptions& options) {
  ModelShape shape = ShapeByName(options.shape);
  gguf::GgufWriter writer;
  int64_t vocab_size = 0;
  if (options.vocab_path.empty()) {
    vocabgen::BpeVocab vocab = vocabgen::BuiltinVocab();
    vocab_size = static_cast<int64_t>(vocab.tokens.size());
    vocabgen::WriteTokenizerMetadata(vocab, writer);
  } else {
    gguf::GgufFile vocab = OpenModelFile(options.vocab_path);
    const gguf::ArrayValue* tokens = vocab.FindArray("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->strings.empty()) {
      throw Error(
          fmt::format("{}: no tokenizer.ggml.tokens: not a vocabulary file", options.vocab_path));
    }
    vocab_size = static_cast<int64_t>(tokens->strings.size());
    for (const auto& [key, value] : vocab.metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) writer.CopyValue(key, value);
    }
  }
  const int head_dim = static_cast<int>(shape.embedding_length / shape.n_head);

  const std::string& arch = options.architecture;
  if (arch != "llama" && arch != "qwen2") {
    throw Error(fmt::format("unknown architecture '{}' (llama or qwen2)", arch));
  }
  writer.SetString("general.architecture", arch);
  writer.SetString("general.name", shape.name + "-random");
  writer.SetUint32("general.file_type", FileTypeOf(options.type));
  writer.SetUint32("general.quantization_version", 2);
  writer.SetUint32(arch + ".context_length", static_cast<uint32_t>(shape.context_length));
  writer.SetUint32(arch + ".embedding_length", static_cast<uint32_t>(shape.embedding_length));
  writer.SetUint32(arch + ".block_count", static_cast<uint32_t>(shape.n_layer));
  writer.SetUint32(arch + ".feed_forward_length", static_cast<uint32_t>(shape.feed_forward_length));
  writer.SetUint32(arch + ".attention.head_count", static_cast<uint32_t>(shape.n_head));
  writer.SetUint32(arch + ".attention.head_count_kv", static_cast<uint32_t>(shape.n_kv_head));
  writer.SetFloat32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  writer.SetFloat32(arch + ".rope.freq_base", shape.rope_freq_base);
  writer.SetUint32(arch + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  writer.SetUint32(arch + ".vocab_size", static_cast<uint32_t>(vocab_size));

  ThreadPool pool(options.threads);
  uint64_t tensor_seed = options.seed * 0x100000001b3ull;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float stddev) {
    kernels::WeightType type = options.type;
    // K-quants need rows of 256; like llama.cpp, fall back to Q8_0 where a row does not divide.
    if (cols % static_cast<int64_t>(kernels::BlockElements(type)) != 0)
      type = kernels::WeightType::kQ8_0;
    if (cols % static_cast<int64_t>(kernels::BlockElements(type)) != 0)
      type = kernels::WeightType::kF16;
    size_t row_bytes = kernels::RowBytes(type, cols);
    std::vector<uint8_t> data(row_bytes * static_cast<size_t>(rows));
    uint64_t seed = ++tensor_seed * 0x9e3779b97f4a7c15ull;
    pool.ParallelFor(static_cast<size_t>(rows), [&](size_t begin, size_t end) {
      std::vector<float> values(static_cast<size_t>(cols));
      for (size_t row = begin; row < end; ++row) {
        FillNormal(seed + row, stddev, values.data(), cols);
        kernels::QuantizeRow(type, values.data(), cols, data.data() + row * row_bytes);
      }
    });
    writer.AddTensor(name, static_cast<gguf::TensorType>(type),
                     {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}, std::move(data));
  };
  auto vector = [&](const std::string& name, int64_t size, float stddev) {
    std::vector<float> values(static_cast<size_t>(size));
    FillNormal(++tensor_seed * 0x9e3779b97f4a7c15ull, stddev, values.data(), size);
    writer.AddTensor(name, gguf::TensorType::kF32, {static_cast<uint64_t>(size)},
                     FloatBytes(values));
  };
  auto ones = [&](const std::string& name, int64_t size) {
    writer.AddTensor(name, gguf::TensorType::kF32, {static_cast<uint64_t>(size)},
                     FloatBytes(std::vector<float>(static_cast<size_t>(size), 1.0f)));
  };

  const int64_t n_embd = shape.embedding_length;
  const int64_t kv_dim = int64_t{shape.n_kv_head} * head_dim;
  const int64_t n_ff = shape.feed_forward_length;
  const float stddev = 0.02f;
  matrix("token_embd.weight", vocab_size, n_embd, stddev);
  ones("output_norm.weight", n_embd);
  if (shape.llama3_rope_scaling) {
    writer.AddTensor("rope_freqs.weight", gguf::TensorType::kF32,
                     {static_cast<uint64_t>(head_dim / 2)},
                     FloatBytes(Llama3RopeFactors(head_dim, shape.rope_freq_base)));
  }
  for (int layer = 0; layer < shape.n_layer; ++layer) {
    std::string prefix = fmt::format("blk.{}.", layer);
    ones(prefix + "attn_norm.weight", n_embd);
    matrix(prefix + "attn_q.weight", n_embd, n_embd, stddev);
    matrix(prefix + "attn_k.weight", kv_dim, n_embd, stddev);
    matrix(prefix + "attn_v.weight", kv_dim, n_embd, stddev);
    if (arch == "qwen2") {
      vector(prefix + "attn_q.bias", n_embd, 0.1f);
      vector(prefix + "attn_k.bias", kv_dim, 0.1f);
      vector(prefix + "attn_v.bias", kv_dim, 0.1f);
    }
    matrix(prefix + "attn_output.weight", n_embd, n_embd, stddev);
    ones(prefix + "ffn_norm.weight", n_embd);
    matrix(prefix + "ffn_gate.weight", n_ff, n_embd, stddev);
    matrix(prefix + "ffn_up.weight", n_ff, n_embd, stddev);
    matrix(prefix + "ffn_down.weight", n_embd, n_ff, stddev);
  }
  writer.Write(options.output_path);
  spdlog::info("wrote {} ({} {} shape, {}, vocab {} from {})", options.output_path, arch,
               options.shape, kernels::WeightTypeName(options.type), vocab_size,
               options.vocab_path.empty() ? "the built-in vocabulary" : options.vocab_path);
}

}  // namespace reprise::modelgen
