#include "kvcache/block_pool.h"

#include <sys/mman.h>

#include <algorithm>
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
  if (memory_.size() >= AlignedBuffer<uint8_t>::kMapThreshold) {
    populating_ = std::thread([this] { PopulateMemory(); });
  }
}

BlockPool::~BlockPool() {
  stop_populating_.store(true, std::memory_order_relaxed);
  FinishPopulating();
}

void BlockPool::FinishPopulating() {
  if (populating_.joinable()) populating_.join();
}

void BlockPool::PopulateMemory() {
  // A fresh mapping is faulted in (and zeroed, and with transparent huge pages compacted) on
  // first touch: paid inside requests, that made a fresh engine's first requests measurably
  // slower than its later ones (bench unique's whole cost of the cache was that), and at start-up
  // it takes seconds for a few GiB. So it runs beside the engine. MADV_POPULATE_WRITE (Linux
  // 5.14+) faults pages in without writing to them, so requests may use the blocks meanwhile;
  // where the kernel lacks it, pages stay faulted in on first use.
#if defined(MADV_POPULATE_WRITE)
  // One huge page at a time: the kernel's lock on the address space is let go between chunks,
  // so the engine's own allocations and faults do not queue behind a long populate (with 64 MiB
  // chunks a server took 2-8 s to become ready instead of 0.13; with 2 MiB, 0.25-0.38 s).
  constexpr size_t kChunk = size_t{2} << 20;
  uint8_t* base = memory_.data();
  for (size_t offset = 0; offset < memory_.size(); offset += kChunk) {
    if (stop_populating_.load(std::memory_order_relaxed)) return;
    const size_t length = std::min(kChunk, memory_.size() - offset);
    if (::madvise(base + offset, length, MADV_POPULATE_WRITE) != 0) return;
  }
#endif
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
