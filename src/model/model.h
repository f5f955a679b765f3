// A llama-family transformer (llama, qwen2) loaded from a GGUF file, with a forward pass over a
// batch of tokens from many sequences that reads and writes K/V through block tables.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "model/forward_batch.h"
#include "model/model_config.h"

namespace reprise {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  kernels::WeightView wq, wk, wv,
      wo;                     // [n_head*head_dim][n_embd], [kv_dim][n_embd] x2, [n_embd][q_dim]
  const float* bq = nullptr;  // [q_dim] (qwen2), else null
  const float* bk = nullptr;  // [kv_dim]
  const float* bv = nullptr;  // [kv_dim]
  const float* ffn_norm = nullptr;           // [n_embd]
  kernels::WeightView w_gate, w_up, w_down;  // [n_ff][n_embd] x2, [n_embd][n_ff]

  // The layer's seven matrices.
  std::array<kernels::WeightView*, 7> Matrices() {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
  std::array<const kernels::WeightView*, 7> Matrices() const {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
};

// A digest of everything in a model file that determines KV values (metadata, tensor table and
// a sample of every tensor's bytes): cheap, and needs only the file mapped, not the model loaded.
Digest WeightsFingerprint(const gguf::GgufFile& file);

class Model {
 public:
  // Opens the file (its bytes held as `residence` says) and checks every tensor's presence, type
  // and shape. A private copy's matrices are then laid out as this CPU's kernels read them
  // fastest (kernels::PreferredLayout); a file's map is read as stored. Throws Error.
  static std::unique_ptr<Model> Load(const std::string& path,
                                     FileResidence residence = FileResidence::kMapped);

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return file_; }

  // WeightsFingerprint(file()) of the file as stored (taken before any matrix was laid out
  // anew), for keying cached blocks to this model.
  const Digest& WeightsFingerprint() const { return weights_fingerprint_; }

  // Runs the batch, writing each token's K/V into `kv` and the logits of batch.logit_rows into
  // logits: [batch.logit_rows.size()][vocab_size]. Not thread-safe: one caller at a time.
  void Forward(const ForwardBatch& batch, const kernels::PagedKv& kv, ThreadPool& pool,
               float* logits);

  // The weight bytes one decoded token reads: every matrix, norm and bias of the layers, the
  // output norm and matrix, and one row of the token embedding. What bounds decode speed by
  // memory bandwidth, beside the K/V it reads.
  size_t DecodeWeightBytes() const;

  // Sizes the scratch buffers up front so that no step allocates.
  void Reserve(size_t max_tokens, size_t max_logit_rows) {
    EnsureScratch(max_tokens, max_logit_rows);
  }

  // Reads every weight byte once, with the pool's threads. The first pass over freshly loaded
  // weights can run several times slower than later ones (in one VM, one thread's pass over a
  // 1B model took 28-36 ms in most starts and up to 268 ms in others): done at start-up, that
  // cost stays out of the first request.
  void TouchWeights(ThreadPool& pool) const;

 private:
  Model() = default;
  void BindWeights();
  void ArrangeMatrices();
  void EnsureScratch(size_t num_tokens, size_t num_logit_rows);

  gguf::GgufFile file_;
  Digest weights_fingerprint_;
  ModelConfig config_;
  kernels::WeightView token_embedding_;   // [vocab][n_embd]
  kernels::WeightView output_;            // [vocab][n_embd] (token_embedding_ when tied)
  const float* output_norm_ = nullptr;    // [n_embd]
  std::vector<float> rope_freq_factors_;  // [rope_dim/2] or empty (Llama 3 rope scaling)
  std::vector<LayerWeights> layers_;
  std::vector<std::vector<float>> owned_vectors_;  // f32 copies of norms and biases

  // Scratch reused across steps, grown on demand (never shrinks).
  size_t scratch_tokens_ = 0;
  AlignedBuffer<float> x_;       // [tokens][n_embd] residual stream
  AlignedBuffer<float> normed_;  // [tokens][n_embd]
  AlignedBuffer<float> q_;       // [tokens][q_dim]
  AlignedBuffer<float> k_;       // [tokens][kv_dim]
  AlignedBuffer<float> v_;       // [tokens][kv_dim]
  AlignedBuffer<float> attn_;    // [tokens][q_dim]
  // [tokens][n_head] queries in the KV type's prepared form (kernels::PrepareQueries), made
  // once per layer and read by every split; empty where the type has none.
  AlignedBuffer<std::byte> prepared_queries_;
  AlignedBuffer<float> proj_;       // [tokens][n_embd]
  AlignedBuffer<float> gate_;       // [tokens][n_ff]
  AlignedBuffer<float> up_;         // [tokens][n_ff]
  std::vector<float> rope_angles_;  // [tokens][rope_dim] cos, sin of each token's position
  // Where each token's K/V go (the same in every layer): its block and slot in that block.
  struct KvSlot {
    int32_t block = 0;
    int slot = 0;
  };
  std::vector<KvSlot> kv_slots_;  // [tokens]
  AlignedBuffer<float> final_;    // [logit rows][n_embd]
  // Attention work of the current step: runs of batch rows [first, first + count) that are
  // consecutive positions of one sequence, at most kAttentionRunTokens long.
  struct AttentionRun {
    size_t first = 0;
    int count = 0;
  };
  std::vector<AttentionRun> attention_runs_;
  // One (run, KV head, split) of the step's attention. A run whose last query needs one split
  // writes its output directly; the splits of a longer one are separate items (so that one long
  // sequence keeps every thread busy), each into its partial; the thread that finishes the last
  // split of a (run, KV head) merges them, in split order.
  struct AttentionItem {
    size_t run = 0;
    int kv_head = 0;
    int split = 0;
    int splits = 1;
    size_t first_split = 0;  // index of this (run, KV head)'s split 0 item
    size_t cost = 0;         // positions read times the run's tokens, for dealing the items
  };
  std::vector<AttentionItem> attention_items_;
  std::vector<kernels::AttentionPartial> attention_item_partials_;  // [item], when splits > 1
  std::vector<size_t> attention_order_;        // item indices, in the order threads take them
  std::vector<size_t> attention_group_costs_;  // [item] the cost of the items sharing its K/V
  // [item] at split 0 items: splits of that (run, KV head) not finished in the current layer.
  std::vector<std::atomic<int>> attention_splits_left_;  // replaced, never resized, when short
  std::vector<float> attention_partials_;                // the partials' rows, max and sum
};

}  // namespace reprise
