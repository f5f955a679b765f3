#include "model/model.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "hf/model_source.h"
#include "kernels/cpu_target.h"
#include "kernels/ops.h"

namespace reprise {

namespace {

// Longest run of one sequence's tokens given to one attention call (see Forward).
constexpr int kAttentionRunTokens = 16;

// Fewest gate elements a thread takes in SwiGlu (a multiple of its 16 lanes): below this a
// thread's share costs less than waking it.
constexpr size_t kSwiGluGrain = 256;

using gguf::TensorInfo;
using kernels::WeightType;
using kernels::WeightView;

// The bytes a matrix's rows take (stored or arranged in row groups: the same bytes).
size_t MatrixBytes(const WeightView& w) {
  return kernels::RowBytes(w.type, w.cols) * static_cast<size_t>(w.rows);
}

const TensorInfo& Require(const gguf::GgufFile& file, const std::string& name) {
  const TensorInfo* tensor = file.FindTensor(name);
  if (tensor == nullptr) throw Error(fmt::format("{}: missing tensor '{}'", file.path(), name));
  return *tensor;
}

WeightView MatrixView(const gguf::GgufFile& file, const std::string& name, int64_t rows,
                      int64_t cols) {
  const TensorInfo& tensor = Require(file, name);
  uint32_t raw_type = static_cast<uint32_t>(tensor.type);
  if (!kernels::IsSupportedWeightType(raw_type)) {
    throw Error(fmt::format("{}: tensor '{}' has type {}, which Reprise does not run", file.path(),
                            name, gguf::TypeName(tensor.type)));
  }
  if (tensor.shape.size() != 2 || static_cast<int64_t>(tensor.shape[0]) != cols ||
      static_cast<int64_t>(tensor.shape[1]) != rows) {
    throw Error(fmt::format("{}: tensor '{}' has shape [{}], expected [{}, {}]", file.path(), name,
                            fmt::join(tensor.shape, ", "), cols, rows));
  }
  return WeightView{static_cast<WeightType>(raw_type), tensor.data, rows, cols};
}

}  // namespace

std::unique_ptr<Model> Model::Load(const std::string& path, FileResidence residence) {
  std::unique_ptr<Model> model(new Model());
  model->file_ = OpenModelFile(path, residence);
  try {
    model->config_ = ModelConfig::FromGguf(model->file_);
    model->BindWeights();
    model->weights_fingerprint_ = reprise::WeightsFingerprint(model->file_);
    if (residence == FileResidence::kPrivateCopy) model->ArrangeMatrices();
  } catch (const Error& error) {
    // Messages quote names and values from the file: nothing in them may reach a terminal raw.
    throw Error(EscapeBytes(error.what(), kMaxMessageBytes));
  }
  return model;
}

void Model::BindWeights() {
  const ModelConfig& c = config_;
  const int64_t n_embd = c.embedding_length;
  const int64_t q_dim = c.q_dim();
  const int64_t kv_dim = c.kv_dim();
  const int64_t n_ff = c.feed_forward_length;

  // 1-D tensors (norms, biases) are converted to f32 once, whatever their stored type.
  owned_vectors_.clear();
  auto vector = [&](const std::string& name, int64_t size, bool required) -> const float* {
    const TensorInfo* tensor = file_.FindTensor(name);
    if (tensor == nullptr) {
      if (required) throw Error(fmt::format("{}: missing tensor '{}'", file_.path(), name));
      return nullptr;
    }
    if (tensor->NumElements() != static_cast<uint64_t>(size)) {
      throw Error(fmt::format("{}: tensor '{}' has {} elements, expected {}", file_.path(), name,
                              tensor->NumElements(), size));
    }
    uint32_t raw_type = static_cast<uint32_t>(tensor->type);
    if (!kernels::IsSupportedWeightType(raw_type)) {
      throw Error(fmt::format("{}: tensor '{}' has unsupported type {}", file_.path(), name,
                              gguf::TypeName(tensor->type)));
    }
    auto& values = owned_vectors_.emplace_back(static_cast<size_t>(size));
    kernels::DequantizeRow(WeightView{static_cast<WeightType>(raw_type), tensor->data, 1, size}, 0,
                           values.data());
    return values.data();
  };
  owned_vectors_.reserve(static_cast<size_t>(c.n_layer) * 5 + 2);

  token_embedding_ = MatrixView(file_, "token_embd.weight", c.vocab_size, n_embd);
  output_ = file_.FindTensor("output.weight") != nullptr
                ? MatrixView(file_, "output.weight", c.vocab_size, n_embd)
                : token_embedding_;
  output_norm_ = vector("output_norm.weight", n_embd, true);
  if (const float* factors = vector("rope_freqs.weight", c.rope_dim / 2, false)) {
    rope_freq_factors_.assign(factors, factors + c.rope_dim / 2);
  }
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    std::string prefix = fmt::format("blk.{}.", i);
    LayerWeights& layer = layers_[static_cast<size_t>(i)];
    layer.attn_norm = vector(prefix + "attn_norm.weight", n_embd, true);
    layer.wq = MatrixView(file_, prefix + "attn_q.weight", q_dim, n_embd);
    layer.wk = MatrixView(file_, prefix + "attn_k.weight", kv_dim, n_embd);
    layer.wv = MatrixView(file_, prefix + "attn_v.weight", kv_dim, n_embd);
    layer.wo = MatrixView(file_, prefix + "attn_output.weight", n_embd, q_dim);
    layer.bq = vector(prefix + "attn_q.bias", q_dim, false);
    layer.bk = vector(prefix + "attn_k.bias", kv_dim, false);
    layer.bv = vector(prefix + "attn_v.bias", kv_dim, false);
    layer.ffn_norm = vector(prefix + "ffn_norm.weight", n_embd, true);
    layer.w_gate = MatrixView(file_, prefix + "ffn_gate.weight", n_ff, n_embd);
    layer.w_up = MatrixView(file_, prefix + "ffn_up.weight", n_ff, n_embd);
    layer.w_down = MatrixView(file_, prefix + "ffn_down.weight", n_embd, n_ff);
  }
}

void Model::ArrangeMatrices() {
  const kernels::CpuTarget target = kernels::BestCpuTarget();
  std::vector<WeightView*> views;
  for (LayerWeights& layer : layers_) {
    for (WeightView* w : layer.Matrices()) views.push_back(w);
  }
  // The output matrix, read whole for every decoded token, even when it is the token embedding
  // (tied: then both views take the arranged layout, and the embedding's lookups read their row
  // back from its group, DequantizeRow). An embedding of its own stays as stored: its rows are
  // only looked up one by one.
  views.push_back(&output_);
  if (output_.data == token_embedding_.data) views.push_back(&token_embedding_);
  std::erase_if(views, [&](const WeightView* w) {
    return kernels::PreferredLayout(target, w->type) == kernels::WeightLayout::kRowMajor;
  });
  if (views.empty()) return;
  file_.Rewrite([&](const gguf::WritableTensors& tensors) {
    std::map<const void*, WeightView> arranged;  // each tensor once, however many views name it
    for (WeightView* w : views) {
      auto it = arranged.find(w->data);
      if (it == arranged.end()) {
        uint8_t* data = tensors.At(w->data, MatrixBytes(*w));
        const kernels::WeightLayout layout = kernels::PreferredLayout(target, w->type);
        it = arranged.emplace(w->data, kernels::ArrangeRowGroups(*w, layout, data)).first;
      }
      *w = it->second;
    }
  });
}

void Model::TouchWeights(ThreadPool& pool) const {
  // In 2 MiB pieces, so that the threads share a few large matrices evenly.
  constexpr size_t kPieceBytes = size_t{2} << 20;
  struct Piece {
    const uint8_t* data;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  const auto add = [&](const kernels::WeightView& w) {
    const auto* data = static_cast<const uint8_t*>(w.data);
    const size_t bytes = MatrixBytes(w);
    for (size_t offset = 0; offset < bytes; offset += kPieceBytes) {
      pieces.push_back({data + offset, std::min(kPieceBytes, bytes - offset)});
    }
  };
  add(token_embedding_);
  if (output_.data != token_embedding_.data) add(output_);
  for (const LayerWeights& layer : layers_) {
    for (const kernels::WeightView* w : layer.Matrices()) add(*w);
  }
  std::atomic<uint8_t> sink{0};
  pool.ParallelFor(pieces.size(), [&](size_t begin, size_t end) {
    uint8_t folded = 0;
    for (size_t i = begin; i < end; ++i) {
      for (size_t offset = 0; offset < pieces[i].bytes; offset += 64) {
        folded ^= pieces[i].data[offset];
      }
    }
    // Stored, so that the compiler keeps the reads.
    sink.fetch_xor(folded, std::memory_order_relaxed);
  });
}

size_t Model::DecodeWeightBytes() const {
  const auto floats = [](const float* vector, int64_t n) {
    return vector == nullptr ? size_t{0} : static_cast<size_t>(n) * sizeof(float);
  };
  const ModelConfig& c = config_;
  const int64_t q_dim = c.q_dim();
  const int64_t kv_dim = c.kv_dim();
  size_t bytes = kernels::RowBytes(token_embedding_.type, token_embedding_.cols) +
                 floats(output_norm_, c.embedding_length) + MatrixBytes(output_);
  for (const LayerWeights& layer : layers_) {
    bytes += floats(layer.attn_norm, c.embedding_length) +
             floats(layer.ffn_norm, c.embedding_length) + floats(layer.bq, q_dim) +
             floats(layer.bk, kv_dim) + floats(layer.bv, kv_dim);
    for (const kernels::WeightView* w : layer.Matrices()) bytes += MatrixBytes(*w);
  }
  return bytes;
}

Digest WeightsFingerprint(const gguf::GgufFile& file) {
  // Hashing every byte of a multi-gigabyte file would slow start-up for little gain: the header
  // (all metadata and the tensor table) plus three windows of each tensor tell files apart.
  constexpr size_t kWindow = 4096;
  Sha256 hasher;
  hasher.Update("reprise-weights-v1");
  auto header = file.HeaderBytes();
  hasher.Update(header.data(), header.size());
  for (const auto& tensor : file.tensors()) {
    size_t size = tensor.num_bytes;
    for (size_t start : {size_t{0}, size / 2, size > kWindow ? size - kWindow : 0}) {
      hasher.Update(tensor.data + start, std::min(kWindow, size - start));
    }
  }
  return hasher.Finish();
}

void Model::EnsureScratch(size_t num_tokens, size_t num_logit_rows) {
  const ModelConfig& c = config_;
  if (num_tokens > scratch_tokens_) {
    const auto q_dim = static_cast<size_t>(c.q_dim());
    const auto kv_dim = static_cast<size_t>(c.kv_dim());
    size_t n_embd = static_cast<size_t>(c.embedding_length);
    size_t n_ff = static_cast<size_t>(c.feed_forward_length);
    x_.Resize(num_tokens * n_embd);
    normed_.Resize(num_tokens * n_embd);
    q_.Resize(num_tokens * q_dim);
    k_.Resize(num_tokens * kv_dim);
    v_.Resize(num_tokens * kv_dim);
    attn_.Resize(num_tokens * q_dim);
    proj_.Resize(num_tokens * n_embd);
    gate_.Resize(num_tokens * n_ff);
    up_.Resize(num_tokens * n_ff);
    scratch_tokens_ = num_tokens;
  }
  if (final_.size() < num_logit_rows * static_cast<size_t>(c.embedding_length)) {
    final_.Resize(std::max(num_logit_rows, scratch_tokens_) *
                  static_cast<size_t>(c.embedding_length));
  }
}

void Model::Forward(const ForwardBatch& batch, const kernels::PagedKv& kv, ThreadPool& pool,
                    float* logits) {
  const ModelConfig& c = config_;
  const size_t num_tokens = batch.size();
  if (num_tokens == 0) return;
  REPRISE_CHECK(batch.positions.size() == num_tokens && batch.sequence_index.size() == num_tokens,
                "malformed batch");
  REPRISE_CHECK(kv.n_layer == c.n_layer && kv.n_kv_head == c.n_kv_head && kv.head_dim == c.head_dim,
                "KV storage shape does not match the model");
  EnsureScratch(num_tokens, batch.logit_rows.size());

  const int64_t n_embd = c.embedding_length;
  const int64_t q_dim = c.q_dim();
  const int64_t kv_dim = c.kv_dim();
  const int64_t n_ff = c.feed_forward_length;
  const int group = c.n_head / c.n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const size_t prepared_head_bytes = kernels::PreparedQueryBytes(kv);
  const size_t prepared_token_bytes = prepared_head_bytes * static_cast<size_t>(c.n_head);
  if (prepared_queries_.size() < num_tokens * prepared_token_bytes) {
    prepared_queries_.Resize(num_tokens * prepared_token_bytes);
  }
  const auto tokens = static_cast<int64_t>(num_tokens);

  kernels::RopeParams rope;
  rope.head_dim = c.head_dim;
  rope.rope_dim = c.rope_dim;
  rope.freq_base = c.rope_freq_base;
  rope.freq_scale = c.rope_freq_scale;
  rope.freq_factors = rope_freq_factors_.empty() ? nullptr : rope_freq_factors_.data();
  rope.style = c.rope_style;

  // Each token's rotary angles and K/V slot, once for every layer (the angles for both Q and K).
  const auto rope_width = static_cast<size_t>(c.rope_dim);
  rope_angles_.resize(num_tokens * rope_width);
  kv_slots_.resize(num_tokens);
  for (size_t i = 0; i < num_tokens; ++i) {
    const int32_t position = batch.positions[i];
    kernels::RopeAngles(position, rope, rope_angles_.data() + i * rope_width);
    auto table = batch.block_tables[static_cast<size_t>(batch.sequence_index[i])];
    const auto block_index = static_cast<size_t>(position / kv.block_size);
    REPRISE_CHECK(block_index < table.size(), "position {} has no block", position);
    kv_slots_[i] = {.block = table[block_index], .slot = position % kv.block_size};
  }

  float* x = x_.data();  // [tokens][n_embd]
  for (size_t i = 0; i < num_tokens; ++i) {
    int32_t token = batch.tokens[i];
    REPRISE_CHECK(token >= 0 && token < c.vocab_size, "token {} outside the vocabulary", token);
    kernels::DequantizeRow(token_embedding_, token, x + i * n_embd);
  }

  auto rms_norm_rows = [&](const float* in, const float* weight, float* out) {
    pool.ParallelFor(num_tokens, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        kernels::RmsNorm(in + i * n_embd, weight, n_embd, c.rms_eps, out + i * n_embd);
      }
    });
  };
  // x += delta, row by row on the pool (elementwise: the same bits however rows are shared).
  auto add_rows = [&](float* rows, const float* delta) {
    pool.ParallelFor(num_tokens, [&](size_t begin, size_t end) {
      kernels::Add(rows + begin * n_embd, delta + begin * n_embd,
                   static_cast<int64_t>(end - begin) * n_embd, rows + begin * n_embd);
    });
  };
  auto add_bias = [&](float* rows, const float* bias, int64_t width) {
    if (bias == nullptr) return;
    for (size_t i = 0; i < num_tokens; ++i)
      kernels::Add(rows + i * width, bias, width, rows + i * width);
  };

  // Runs of consecutive positions of one sequence, cut to at most kAttentionRunTokens so that
  // the threads have several pieces of work (a run's cut points do not change any bits).
  attention_runs_.clear();
  for (size_t i = 0; i < num_tokens; ++i) {
    if (!attention_runs_.empty()) {
      AttentionRun& last = attention_runs_.back();
      size_t prev = last.first + static_cast<size_t>(last.count) - 1;
      if (prev + 1 == i && last.count < kAttentionRunTokens &&
          batch.sequence_index[prev] == batch.sequence_index[i] &&
          batch.positions[prev] + 1 == batch.positions[i]) {
        ++last.count;
        continue;
      }
    }
    attention_runs_.push_back(AttentionRun{.first = i, .count = 1});
  }
  // The attention items of every layer (see AttentionItem), with room for their partials.
  attention_items_.clear();
  const size_t partial_row = static_cast<size_t>(group) * c.head_dim;
  size_t partial_floats = 0;
  for (size_t r = 0; r < attention_runs_.size(); ++r) {
    const AttentionRun& run = attention_runs_[r];
    const int positions = batch.positions[run.first] + run.count;  // of the run's last query
    const int splits = kernels::AttentionSplits(kv.block_size, positions);
    const int split_positions = (positions + splits - 1) / splits;  // about; for the cost only
    for (int h = 0; h < c.n_kv_head; ++h) {
      const size_t first_split = attention_items_.size();
      for (int s = 0; s < splits; ++s) {
        const int read = std::min(split_positions, positions - s * split_positions);
        attention_items_.push_back(
            {.run = r,
             .kv_head = h,
             .split = s,
             .splits = splits,
             .first_split = first_split,
             .cost = static_cast<size_t>(std::max(read, 1)) * static_cast<size_t>(run.count)});
        if (splits > 1) partial_floats += run.count * (partial_row + 2 * group);
      }
    }
  }
  const size_t num_items = attention_items_.size();
  if (attention_partials_.size() < partial_floats) attention_partials_.resize(partial_floats);
  attention_item_partials_.assign(num_items, kernels::AttentionPartial{});
  float* next_partial = attention_partials_.data();
  for (size_t k = 0; k < num_items; ++k) {
    const AttentionItem& item = attention_items_[k];
    if (item.splits == 1) continue;
    const size_t rows = static_cast<size_t>(attention_runs_[item.run].count) * group;
    attention_item_partials_[k] = {.acc = next_partial,
                                   .acc_stride = static_cast<int64_t>(partial_row),
                                   .max = next_partial + rows * c.head_dim,
                                   .sum = next_partial + rows * c.head_dim + rows};
    next_partial += rows * (c.head_dim + 2);
  }
  // Threads take items one at a time, so a thread that starts late or runs slow does not leave
  // the others waiting on a fixed share; which thread computes an item never changes its bits.
  // The order keeps together the items that read the same K/V (one sequence's runs over one
  // split of one KV head), so that the split's planes are still in cache for the next run, not
  // read again from memory after every other head's and split's (8 KV heads of 3B, a turn of 83
  // tokens over 1,831 cached: 384 items per layer, 10% less attention time); such groups go
  // costliest first.
  attention_order_.resize(num_items);
  for (size_t k = 0; k < num_items; ++k) attention_order_[k] = k;
  auto reads = [&](size_t k) {
    const AttentionItem& item = attention_items_[k];
    return std::tuple(batch.sequence_index[attention_runs_[item.run].first], item.kv_head,
                      item.split);
  };
  std::sort(attention_order_.begin(), attention_order_.end(), [&](size_t a, size_t b) {
    return std::pair(reads(a), attention_items_[a].run) <
           std::pair(reads(b), attention_items_[b].run);
  });
  attention_group_costs_.assign(num_items, 0);
  for (size_t begin = 0; begin < num_items;) {
    size_t end = begin;
    size_t cost = 0;
    for (; end < num_items && reads(attention_order_[end]) == reads(attention_order_[begin]);
         ++end) {
      cost += attention_items_[attention_order_[end]].cost;
    }
    for (size_t i = begin; i < end; ++i) attention_group_costs_[attention_order_[i]] = cost;
    begin = end;
  }
  std::stable_sort(attention_order_.begin(), attention_order_.end(), [&](size_t a, size_t b) {
    return attention_group_costs_[a] > attention_group_costs_[b];
  });
  if (attention_splits_left_.size() < num_items) {
    attention_splits_left_ = std::vector<std::atomic<int>>(num_items);
  }

  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& layer = layers_[static_cast<size_t>(l)];
    rms_norm_rows(x, layer.attn_norm, normed_.data());
    const kernels::MatMulOutput qkv[] = {
        {&layer.wq, q_.data()}, {&layer.wk, k_.data()}, {&layer.wv, v_.data()}};
    kernels::MatMuls(qkv, normed_.data(), tokens, pool);
    add_bias(q_.data(), layer.bq, q_dim);
    add_bias(k_.data(), layer.bk, kv_dim);
    add_bias(v_.data(), layer.bv, kv_dim);

    // Rotary embedding, then K/V of every token of the step are stored before any query reads
    // them: a query then reads its own and earlier positions from the cache storage, the same
    // bits whether they were computed now or in an earlier step. Tokens write distinct slots.
    pool.ParallelFor(num_tokens, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const float* angles = rope_angles_.data() + i * rope_width;
        kernels::RopeRotate(q_.data() + i * q_dim, c.n_head, angles, rope);
        if (prepared_token_bytes > 0) {
          kernels::PrepareQueries(kv, q_.data() + i * q_dim, c.n_head, scale,
                                  prepared_queries_.data() + i * prepared_token_bytes);
        }
        kernels::RopeRotate(k_.data() + i * kv_dim, c.n_kv_head, angles, rope);
        kernels::StoreKv(kv, l, kv_slots_[i].block, kv_slots_[i].slot, k_.data() + i * kv_dim,
                         v_.data() + i * kv_dim);
      }
    });
    // One call per item (run, KV head, split): each K/V block is read once for all the run's
    // tokens and heads, and each token still gets the bits it would get alone. The last split of
    // a (run, KV head) to finish merges its partials (acquire: it sees the others' writes).
    for (size_t k = 0; k < num_items; ++k) {
      const AttentionItem& item = attention_items_[k];
      if (item.splits > 1 && item.split == 0) {
        attention_splits_left_[k].store(item.splits, std::memory_order_relaxed);
      }
    }
    auto run_item = [&](size_t k) {
      const AttentionItem& item = attention_items_[k];
      const AttentionRun& run = attention_runs_[item.run];
      auto table = batch.block_tables[static_cast<size_t>(batch.sequence_index[run.first])];
      const size_t head_offset =
          run.first * q_dim + static_cast<size_t>(item.kv_head) * group * c.head_dim;
      kernels::PreparedQueries prepared;
      if (prepared_token_bytes > 0) {
        prepared = {.data = prepared_queries_.data() + run.first * prepared_token_bytes +
                            static_cast<size_t>(item.kv_head) * group * prepared_head_bytes,
                    .stride = static_cast<int64_t>(prepared_token_bytes)};
      }
      if (item.splits == 1) {
        kernels::PagedAttentionTokens(kv, l, item.kv_head, q_.data() + head_offset, q_dim, group,
                                      table, batch.positions[run.first], run.count, scale,
                                      attn_.data() + head_offset, q_dim, prepared);
        return;
      }
      kernels::PagedAttentionPartial(kv, l, item.kv_head, q_.data() + head_offset, q_dim, group,
                                     table, batch.positions[run.first], run.count, scale,
                                     item.split, attention_item_partials_[k], prepared);
      if (attention_splits_left_[item.first_split].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        kernels::MergeAttentionPartials(
            kv, group, batch.positions[run.first], run.count,
            std::span(attention_item_partials_)
                .subspan(item.first_split, static_cast<size_t>(item.splits)),
            attn_.data() + head_offset, q_dim);
      }
    };
    std::atomic<size_t> next_item{0};
    pool.ParallelFor(static_cast<size_t>(pool.num_threads()), [&](size_t, size_t) {
      for (size_t k; (k = next_item.fetch_add(1, std::memory_order_relaxed)) < num_items;) {
        run_item(attention_order_[k]);
      }
    });
    kernels::MatMul(layer.wo, attn_.data(), tokens, proj_.data(), pool);
    add_rows(x, proj_.data());

    rms_norm_rows(x, layer.ffn_norm, normed_.data());
    const kernels::MatMulOutput gate_up[] = {{&layer.w_gate, gate_.data()},
                                             {&layer.w_up, up_.data()}};
    kernels::MatMuls(gate_up, normed_.data(), tokens, pool);
    // Split over elements, not tokens, so that one decoding token's gate takes every thread
    // (elementwise: the same bits however the elements are shared).
    pool.ParallelFor(
        num_tokens * n_ff,
        [&](size_t begin, size_t end) {
          kernels::SwiGlu(gate_.data() + begin, up_.data() + begin,
                          static_cast<int64_t>(end - begin), gate_.data() + begin);
        },
        kSwiGluGrain);
    kernels::MatMul(layer.w_down, gate_.data(), tokens, proj_.data(), pool);
    add_rows(x, proj_.data());
  }

  const size_t num_logit_rows = batch.logit_rows.size();
  for (size_t r = 0; r < num_logit_rows; ++r) {
    auto row = static_cast<size_t>(batch.logit_rows[r]);
    REPRISE_CHECK(row < num_tokens, "logit row {} outside the batch", row);
    kernels::RmsNorm(x + row * n_embd, output_norm_, n_embd, c.rms_eps, final_.data() + r * n_embd);
  }
  kernels::MatMul(output_, final_.data(), static_cast<int64_t>(num_logit_rows), logits, pool);
}

}  // namespace reprise
