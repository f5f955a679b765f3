#include "bench/warm_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "kernels/paged_attention.h"
#include "model/kv_layout.h"

namespace reprise::bench {

namespace {

struct Item {
  int kv_head;
  int split;
};

// other_data: read before each layer where shape.from_memory (see WarmAttentionShape).
WarmAttentionTiming TimeOne(const WarmAttentionShape& shape, const std::string& kv_type,
                            const AlignedBuffer<uint64_t>& other_data, ThreadPool& pool, int runs) {
  const int positions = shape.cached + shape.new_tokens;
  kernels::PagedKv kv;
  kv.type = ParseKvType(kv_type);
  kv.n_layer = shape.layers;
  kv.n_kv_head = shape.kv_heads;
  kv.head_dim = shape.head_dim;
  kv.block_size = 16;
  const int blocks = (positions + kv.block_size - 1) / kv.block_size;
  AlignedBuffer<uint8_t> storage(kv.BlockBytes() * static_cast<size_t>(blocks));
  kv.base = storage.data();
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  // Blocks in a shuffled order, as a pool that has served other requests hands them out.
  for (int b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = b;
  std::mt19937 rng(7);
  std::shuffle(table.begin(), table.end(), rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int kv_dim = shape.kv_heads * shape.head_dim;
  std::vector<float> k(static_cast<size_t>(kv_dim)), v(static_cast<size_t>(kv_dim));
  for (int layer = 0; layer < shape.layers; ++layer) {
    for (int p = 0; p < positions; ++p) {
      for (float& e : k) e = normal(rng);
      for (float& e : v) e = normal(rng);
      kernels::StoreKv(kv, layer, table[static_cast<size_t>(p / kv.block_size)], p % kv.block_size,
                       k.data(), v.data());
    }
  }
  const int q_dim = kv_dim * shape.group;
  AlignedBuffer<float> q(static_cast<size_t>(shape.new_tokens) * q_dim);
  for (size_t i = 0; i < q.size(); ++i) q[i] = normal(rng);
  AlignedBuffer<float> out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  // Queries prepared once per token for every head, as the model does.
  const size_t head_bytes = kernels::PreparedQueryBytes(kv);
  const size_t token_bytes = head_bytes * static_cast<size_t>(shape.kv_heads * shape.group);
  AlignedBuffer<std::byte> prepared(std::max<size_t>(1, token_bytes * shape.new_tokens));
  if (head_bytes > 0) {
    for (int t = 0; t < shape.new_tokens; ++t) {
      kernels::PrepareQueries(kv, q.data() + static_cast<size_t>(t) * q_dim,
                              shape.kv_heads * shape.group, scale,
                              prepared.data() + static_cast<size_t>(t) * token_bytes);
    }
  }
  // One item per (KV head, split), each with its partial state.
  const int splits = kernels::AttentionSplits(kv.block_size, positions);
  const int64_t row = static_cast<int64_t>(shape.group) * shape.head_dim;
  const size_t rows = static_cast<size_t>(shape.new_tokens) * shape.group;
  std::vector<Item> items;
  for (int h = 0; h < shape.kv_heads; ++h) {
    for (int s = 0; s < splits; ++s) items.push_back({h, s});
  }
  AlignedBuffer<float> acc(items.size() * static_cast<size_t>(shape.new_tokens * row));
  AlignedBuffer<float> stats(items.size() * 2 * rows);
  std::vector<kernels::AttentionPartial> partials(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    partials[i] = {.acc = acc.data() + i * static_cast<size_t>(shape.new_tokens * row),
                   .acc_stride = row,
                   .max = stats.data() + i * 2 * rows,
                   .sum = stats.data() + i * 2 * rows + rows};
  }
  auto attend = [&](int layer) {
    std::atomic<size_t> next{0};
    pool.ParallelFor(static_cast<size_t>(pool.num_threads()), [&](size_t, size_t) {
      for (size_t i = next.fetch_add(1); i < items.size(); i = next.fetch_add(1)) {
        const Item& item = items[i];
        const size_t offset = static_cast<size_t>(item.kv_head) * row;
        kernels::PreparedQueries queries;
        if (head_bytes > 0) {
          queries = {.data = prepared.data() + offset / shape.head_dim * head_bytes,
                     .stride = static_cast<int64_t>(token_bytes)};
        }
        kernels::PagedAttentionPartial(kv, layer, item.kv_head, q.data() + offset, q_dim,
                                       shape.group, table, shape.cached, shape.new_tokens, scale,
                                       item.split, partials[i], queries);
      }
    });
    pool.ParallelFor(static_cast<size_t>(shape.kv_heads), [&](size_t begin, size_t end) {
      for (size_t h = begin; h < end; ++h) {
        kernels::MergeAttentionPartials(kv, shape.group, shape.cached, shape.new_tokens,
                                        std::span(partials).subspan(h * static_cast<size_t>(splits),
                                                                    static_cast<size_t>(splits)),
                                        out.data() + h * static_cast<size_t>(row), q_dim);
      }
    });
  };
  std::atomic<uint64_t> read_sum{0};
  auto read_other_data = [&] {
    pool.ParallelFor(other_data.size(), [&](size_t begin, size_t end) {
      uint64_t sum = 0;
      for (size_t i = begin; i < end; i += 8) sum += other_data[i];  // a word per line
      read_sum.fetch_add(sum, std::memory_order_relaxed);
    });
  };
  for (int layer = 0; layer < shape.layers; ++layer) attend(layer);  // untimed first calls
  double best = std::numeric_limits<double>::infinity();
  for (int run = 0; run < runs; ++run) {
    double seconds = 0;
    for (int layer = 0; layer < shape.layers; ++layer) {
      if (shape.from_memory) read_other_data();
      const Clock::time_point start = Clock::now();
      attend(layer);
      seconds += SecondsSince(start);
    }
    best = std::min(best, seconds / shape.layers);
  }
  double pairs = 0;  // (query row, position) pairs
  for (int t = 0; t < shape.new_tokens; ++t) pairs += shape.cached + t + 1;
  pairs *= shape.kv_heads * shape.group;
  const double kv_bytes = static_cast<double>(positions) * shape.kv_heads *
                          static_cast<double>(kv.PlaneBytes(0) + kv.PlaneBytes(1)) / kv.block_size;
  return {kv_type, best, 4.0 * pairs * shape.head_dim / best / 1e9, kv_bytes / best / 1e9};
}

}  // namespace

std::vector<WarmAttentionTiming> TimeWarmAttention(const WarmAttentionShape& shape,
                                                   ThreadPool& pool, int runs) {
  // Larger than the last-level caches of the machines this runs on (32-96 MiB per L3), written
  // once so that its pages are the process's own (untouched ones all read as one shared zero
  // page, which stays in cache).
  AlignedBuffer<uint64_t> other_data(shape.from_memory ? (size_t{256} << 20) / 8 : 0);
  for (size_t i = 0; i < other_data.size(); i += 512) other_data[i] = i;
  std::vector<WarmAttentionTiming> timings;
  for (const char* kv_type : {"f16", "q8", "f32"}) {
    timings.push_back(TimeOne(shape, kv_type, other_data, pool, runs));
  }
  return timings;
}

}  // namespace reprise::bench
