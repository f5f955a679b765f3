#include "kvcache/block_pool.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace reprise {

BlockPool::BlockPool(int64_t num_blocks, size_t block_bytes) : block_bytes_(block_bytes) {
  REPRISE_CHECK(num_blocks > 0 && num_blocks <= std::numeric_limits<BlockId>::max(),
                "num_blocks must be in [1, INT32_MAX], got {}", num_blocks);
  REPRISE_CHECK(block_bytes > 0, "block_bytes must be positive");
  REPRISE_CHECK(static_cast<size_t>(num_blocks) <= std::numeric_limits<size_t>::max() / block_bytes,
                "pool size overflows: {} blocks of {} bytes", num_blocks, block_bytes);
  memory_.Resize(static_cast<size_t>(num_blocks) * block_bytes);
  ref_count_.assign(static_cast<size_t>(num_blocks), 0);
  is_free_.assign(static_cast<size_t>(num_blocks), 1);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t id = num_blocks - 1; id >= 0; --id) free_.push_back(static_cast<BlockId>(id));
}

int64_t BlockPool::NumBlocksForBudget(size_t budget_bytes, size_t block_bytes) {
  REPRISE_CHECK(block_bytes > 0, "block_bytes must be positive");
  uint64_t blocks = budget_bytes / block_bytes;
  uint64_t max_blocks = static_cast<uint64_t>(std::numeric_limits<BlockId>::max());
  return static_cast<int64_t>(blocks < max_blocks ? blocks : max_blocks);
}

void BlockPool::CopyBlock(BlockId dst, BlockId src) {
  if (dst == src) return;
  std::memcpy(BlockData(dst), BlockData(src), block_bytes_);
}

int32_t BlockPool::DropRef(BlockId id) {
  int32_t& count = ref_count_[Checked(id)];
  REPRISE_CHECK(count > 0, "block {} released more often than referenced", id);
  return --count;
}

std::optional<BlockId> BlockPool::PopFree() {
  if (free_.empty()) return std::nullopt;
  BlockId id = free_.back();
  free_.pop_back();
  is_free_[static_cast<size_t>(id)] = 0;
  return id;
}

void BlockPool::PushFree(BlockId id) {
  size_t index = Checked(id);
  REPRISE_CHECK(ref_count_[index] == 0, "block {} freed while referenced", id);
  REPRISE_CHECK(is_free_[index] == 0, "block {} freed twice", id);
  is_free_[index] = 1;
  free_.push_back(id);
}

size_t BlockPool::Checked(BlockId id) const {
  REPRISE_CHECK(id >= 0 && static_cast<size_t>(id) < ref_count_.size(), "bad block id {}", id);
  return static_cast<size_t>(id);
}

}  // namespace reprise
