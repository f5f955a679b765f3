#include <fmt/ranges.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "core/text.h"
#include "hf/hf_config.h"
#include "hf/hf_tokenizer.h"
#include "hf/json_file.h"
#include "hf/model_source.h"
#include "hf/safetensors.h"

namespace reprise {

namespace hf {

namespace {

using nlohmann::json;

// What an assembled model's tensors point into.
class Storage : public gguf::TensorStorage {
 public:
  std::vector<SafetensorsFile> shards;
  // Reordered Q/K rows and realigned tensors, on cache lines (huge pages from 1 MiB) as the
  // shards' copies are: decode streams them like any other matrix.
  std::vector<AlignedBuffer<uint8_t>> copies;

  // The shards' private copies made writable one inside the other, then the edit over them and
  // the copies; a shard in a file's map ends it (returning false) before the edit runs.
  bool Rewrite(const std::function<void(const gguf::WritableTensors&)>& edit) override {
    std::vector<std::span<uint8_t>> regions;
    for (AlignedBuffer<uint8_t>& copy : copies) regions.emplace_back(copy.data(), copy.size());
    return RewriteFrom(0, regions, edit);
  }

 private:
  bool RewriteFrom(size_t shard, std::vector<std::span<uint8_t>>& regions,
                   const std::function<void(const gguf::WritableTensors&)>& edit) {
    if (shard == shards.size()) {
      edit(gguf::WritableTensors(regions));
      return true;
    }
    bool edited = false;
    shards[shard].Rewrite([&](std::span<uint8_t> bytes) {
      regions.push_back(bytes);
      edited = RewriteFrom(shard + 1, regions, edit);
    });
    return edited;
  }
};

// A tensor found in the folder, with the file it came from (for messages).
struct Located {
  const SafetensorsTensor* tensor = nullptr;
  const std::string* file = nullptr;
};

// The safetensors files and which one holds each tensor.
std::map<std::string, Located> LoadShards(const std::string& dir, FileResidence residence,
                                          Storage& storage, std::string& identity) {
  namespace fs = std::filesystem;
  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, Located> located;
  if (fs::is_regular_file(index_path)) {
    const json index = ReadJsonFile(index_path);
    const json* weight_map = GetObject(index, "weight_map", index_path);
    if (weight_map == nullptr) {
      throw Error(fmt::format("{}: missing field 'weight_map'", index_path));
    }
    std::map<std::string, size_t> shard_of_name;
    std::vector<std::pair<std::string, std::string>> wanted;  // tensor, shard file name
    for (const auto& [tensor, shard] : weight_map->items()) {
      if (!shard.is_string()) {
        throw Error(
            fmt::format("{}: weight_map entry '{}' is not a file name", index_path, tensor));
      }
      std::string name = shard.get<std::string>();
      // A plain name in the folder: the index may not point anywhere else.
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
        throw Error(fmt::format("{}: weight_map names '{}' for '{}', not a file in the folder",
                                index_path, name, tensor));
      }
      if (!shard_of_name.contains(name)) {
        const std::string shard_path = dir + "/" + name;
        if (!fs::is_regular_file(shard_path)) {
          throw Error(
              fmt::format("{}: shard '{}' (holding '{}') is missing", index_path, name, tensor));
        }
        shard_of_name[name] = storage.shards.size();
        storage.shards.push_back(SafetensorsFile::Open(shard_path, residence));
      }
      wanted.emplace_back(tensor, name);
    }
    for (const auto& [tensor, name] : wanted) {
      const SafetensorsFile& shard = storage.shards[shard_of_name[name]];
      const SafetensorsTensor* found = shard.Find(tensor);
      if (found == nullptr) {
        throw Error(fmt::format("{}: tensor '{}' named in {} is not in the file", shard.path(),
                                tensor, index_path));
      }
      located[tensor] = Located{found, &shard.path()};
    }
  } else if (fs::is_regular_file(single)) {
    storage.shards.push_back(SafetensorsFile::Open(single, residence));
    for (const SafetensorsTensor& tensor : storage.shards.back().tensors()) {
      located[tensor.name] = Located{&tensor, &storage.shards.back().path()};
    }
  } else {
    throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir));
  }
  for (const SafetensorsFile& shard : storage.shards) identity.append(shard.HeaderBytes());
  return located;
}

// Hugging Face stores each head's Q/K rows as two halves (rotate_half); the GGUF forward pass
// rotates adjacent pairs. Row 2i+j of a head comes from row j*(head_dim/2)+i, as llama.cpp's
// converter permutes them; the bytes of a row are moved whole, whatever the dtype.
AlignedBuffer<uint8_t> InterleaveRotaryRows(const SafetensorsTensor& tensor, int64_t heads) {
  const size_t rows = static_cast<size_t>(tensor.shape[0]);
  const size_t row_bytes = tensor.num_bytes / rows;
  const size_t head_rows = rows / static_cast<size_t>(heads);
  const size_t half = head_rows / 2;
  AlignedBuffer<uint8_t> out(tensor.num_bytes);
  for (size_t h = 0; h < static_cast<size_t>(heads); ++h) {
    for (size_t i = 0; i < half; ++i) {
      for (size_t j = 0; j < 2; ++j) {
        std::memcpy(out.data() + (h * head_rows + 2 * i + j) * row_bytes,
                    tensor.data + (h * head_rows + j * half + i) * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

class TensorMapper {
 public:
  // `where` names the folder's weights in messages about a tensor that is missing.
  TensorMapper(std::map<std::string, Located> located, Storage& storage, std::string where)
      : located_(std::move(located)), storage_(storage), where_(std::move(where)) {}

  // Maps Hugging Face tensor `hf_name` of shape `rows` x `cols` (cols 0: a vector of `rows`) to
  // GGUF `gguf_name`; `rotary_heads` > 0 reorders its rows for that many heads.
  void Map(const std::string& hf_name, const std::string& gguf_name, int64_t rows, int64_t cols,
           int64_t rotary_heads = 0) {
    auto it = located_.find(hf_name);
    if (it == located_.end()) {
      throw Error(fmt::format("{}: missing tensor '{}'", where_, hf_name));
    }
    const SafetensorsTensor& tensor = *it->second.tensor;
    std::vector<uint64_t> expected = {static_cast<uint64_t>(rows)};
    if (cols > 0) expected.push_back(static_cast<uint64_t>(cols));
    if (tensor.shape != expected) {
      throw Error(fmt::format("{}: tensor '{}' has shape [{}], expected [{}]", *it->second.file,
                              hf_name, fmt::join(tensor.shape, ", "), fmt::join(expected, ", ")));
    }
    gguf::TensorInfo info;
    info.name = gguf_name;
    info.type = tensor.type;
    info.shape.assign(expected.rbegin(), expected.rend());  // ggml order: innermost first
    info.num_bytes = tensor.num_bytes;
    info.data = tensor.data;
    const size_t element_bytes = tensor.type == gguf::TensorType::kF32 ? 4 : 2;
    if (rotary_heads > 0) {
      info.data = storage_.copies.emplace_back(InterleaveRotaryRows(tensor, rotary_heads)).data();
    } else if (reinterpret_cast<uintptr_t>(tensor.data) % element_bytes != 0) {
      // The format does not promise aligned data; the kernels read whole elements.
      AlignedBuffer<uint8_t>& copy = storage_.copies.emplace_back(tensor.num_bytes);
      if (tensor.num_bytes > 0) std::memcpy(copy.data(), tensor.data, tensor.num_bytes);
      info.data = copy.data();
    }
    used_.insert(hf_name);
    tensors_.push_back(std::move(info));
  }

  bool Has(const std::string& hf_name) const { return located_.contains(hf_name); }

  // Every tensor of the folder must have been mapped: one left over is a part of the model that
  // Reprise would otherwise ignore silently.
  std::vector<gguf::TensorInfo> Finish() {
    for (const auto& [name, where] : located_) {
      if (used_.contains(name) || name.ends_with(".rotary_emb.inv_freq")) continue;
      throw Error(fmt::format("{}: tensor '{}' is not part of a Llama model Reprise runs",
                              *where.file, name));
    }
    return std::move(tensors_);
  }

  void Skip(const std::string& hf_name) { used_.insert(hf_name); }

 private:
  std::map<std::string, Located> located_;
  Storage& storage_;
  std::string where_;
  std::set<std::string> used_;
  std::vector<gguf::TensorInfo> tensors_;
};

}  // namespace

gguf::GgufFile OpenFolder(const std::string& dir, FileResidence residence) {
  namespace fs = std::filesystem;
  try {
    const std::string config_path = dir + "/config.json";
    if (!fs::is_regular_file(config_path)) {
      throw Error(fmt::format("{}: missing (a model folder needs config.json)", config_path));
    }
    std::map<std::string, gguf::Value> metadata;
    const json config = ReadJsonFile(config_path);
    std::string name = fs::path(dir).lexically_normal().filename().string();
    if (name.empty()) name = fs::path(dir).lexically_normal().parent_path().filename().string();
    const HfShape shape = ReadConfig(config, config_path, name, metadata);
    if (!fs::is_regular_file(dir + "/tokenizer.json")) {
      throw Error(
          fmt::format("{}/tokenizer.json: missing (a model folder needs tokenizer.json)", dir));
    }
    ReadTokenizer(dir, config, shape.vocab_size, metadata);

    // The fingerprint's header: what fixes the KV values besides the tensor bytes.
    std::string identity = "reprise-hf-folder-v1\n" + config.dump() + "\n";
    auto storage = std::make_shared<Storage>();
    auto located = LoadShards(dir, residence, *storage, identity);
    TensorMapper mapper(
        std::move(located), *storage,
        storage->shards.size() == 1 && !fs::exists(dir + "/model.safetensors.index.json")
            ? storage->shards[0].path()
            : dir + "/model.safetensors.index.json");
    const int64_t q_dim = shape.n_head * shape.head_dim;
    const int64_t kv_dim = shape.n_kv_head * shape.head_dim;
    const std::string embed = "model.embed_tokens.weight";
    // Tied checkpoints often store the shared matrix once, under either name.
    if (mapper.Has(embed)) {
      mapper.Map(embed, "token_embd.weight", shape.vocab_size, shape.hidden);
      if (shape.tied_embeddings) mapper.Skip("lm_head.weight");
    } else if (shape.tied_embeddings) {
      mapper.Map("lm_head.weight", "token_embd.weight", shape.vocab_size, shape.hidden);
    } else {
      mapper.Map(embed, "token_embd.weight", shape.vocab_size, shape.hidden);  // throws: missing
    }
    if (!shape.tied_embeddings) {
      mapper.Map("lm_head.weight", "output.weight", shape.vocab_size, shape.hidden);
    }
    mapper.Map("model.norm.weight", "output_norm.weight", shape.hidden, 0);
    for (int64_t i = 0; i < shape.n_layer; ++i) {
      const std::string hf = fmt::format("model.layers.{}.", i);
      const std::string blk = fmt::format("blk.{}.", i);
      mapper.Map(hf + "input_layernorm.weight", blk + "attn_norm.weight", shape.hidden, 0);
      mapper.Map(hf + "self_attn.q_proj.weight", blk + "attn_q.weight", q_dim, shape.hidden,
                 shape.n_head);
      mapper.Map(hf + "self_attn.k_proj.weight", blk + "attn_k.weight", kv_dim, shape.hidden,
                 shape.n_kv_head);
      mapper.Map(hf + "self_attn.v_proj.weight", blk + "attn_v.weight", kv_dim, shape.hidden);
      mapper.Map(hf + "self_attn.o_proj.weight", blk + "attn_output.weight", shape.hidden, q_dim);
      mapper.Map(hf + "post_attention_layernorm.weight", blk + "ffn_norm.weight", shape.hidden, 0);
      mapper.Map(hf + "mlp.gate_proj.weight", blk + "ffn_gate.weight", shape.n_ff, shape.hidden);
      mapper.Map(hf + "mlp.up_proj.weight", blk + "ffn_up.weight", shape.n_ff, shape.hidden);
      mapper.Map(hf + "mlp.down_proj.weight", blk + "ffn_down.weight", shape.hidden, shape.n_ff);
    }
    std::vector<gguf::TensorInfo> tensors = mapper.Finish();
    return gguf::GgufFile::Assemble(dir, std::move(identity), std::move(metadata),
                                    std::move(tensors), std::move(storage));
  } catch (const Error& error) {
    // Names and values come from the files: nothing in them may reach a terminal raw.
    throw Error(EscapeBytes(error.what(), kMaxMessageBytes));
  }
}

}  // namespace hf

gguf::GgufFile OpenModelFile(const std::string& path, FileResidence residence) {
  if (std::filesystem::is_directory(path)) return hf::OpenFolder(path, residence);
  return gguf::GgufFile::Open(path, residence);
}

}  // namespace reprise
