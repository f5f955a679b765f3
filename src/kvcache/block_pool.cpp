#include "kvcache/block_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace reprise {

namespace {

// One huge page at a time: the kernel's lock on the address space is let go between chunks, so
// the engine's own allocations and faults do not queue behind a long populate (with 64 MiB
// chunks a server took 2-8 s to become ready instead of 0.13; with 2 MiB, 0.25-0.38 s).
constexpr size_t kPopulateChunk = size_t{2} << 20;
// Memory made resident ahead of the highest block handed out: enough that the blocks of the
// next prefill chunks are always ready, small enough that an idle server holds little. It is
// asked for again when use comes within half of it, so it grows in steps of half a window.
constexpr size_t kMinWindowBytes = size_t{32} << 20;
constexpr size_t kMinWindowBlocks = 64;

size_t RoundUp(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

}  // namespace

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
  window_bytes_ =
      std::min(memory_.size(),
               RoundUp(std::max(kMinWindowBytes, kMinWindowBlocks * block_bytes), kPopulateChunk));
  if (memory_.size() >= AlignedBuffer<uint8_t>::kMapThreshold) {
    // The first window at once, so that the first requests find their blocks resident.
    asked_bytes_ = wanted_bytes_ = window_bytes_;
    populating_ = std::thread([this] { PopulateMemory(); });
  } else {
    populated_bytes_.store(memory_.size(), std::memory_order_release);  // heap memory, zeroed
  }
}

BlockPool::~BlockPool() {
  {
    std::lock_guard lock(populate_mutex_);
    stop_populating_ = true;
  }
  populate_wake_.notify_all();
  if (populating_.joinable()) populating_.join();
}

void BlockPool::FinishPopulating() {
  std::unique_lock lock(populate_mutex_);
  populate_done_.wait(lock, [&] {
    return stop_populating_ || populated_bytes_.load(std::memory_order_acquire) >= wanted_bytes_;
  });
}

void BlockPool::NoteHandedOut(BlockId id) {
  const size_t end = (static_cast<size_t>(id) + 1) * block_bytes_;
  if (end + window_bytes_ / 2 <= asked_bytes_ || asked_bytes_ >= memory_.size()) return;
  asked_bytes_ = std::min(memory_.size(), RoundUp(end + window_bytes_, kPopulateChunk));
  {
    std::lock_guard lock(populate_mutex_);
    wanted_bytes_ = asked_bytes_;
  }
  populate_wake_.notify_one();
}

void BlockPool::PopulateMemory() {
  // A fresh mapping is faulted in (and zeroed, and with transparent huge pages compacted) on
  // first touch: paid inside requests, that made a fresh engine's first requests measurably
  // slower than its later ones (bench unique's whole cost of the cache was that). So it runs
  // beside the engine. MADV_POPULATE_WRITE (Linux 5.14+) faults pages in without writing to
  // them, so requests may use the blocks meanwhile; where the kernel lacks it, pages are faulted
  // in on first use. Populating the whole budget from start-up instead held gigabytes for an
  // idle server and took the memory bandwidth of the first requests for seconds: only a window
  // ahead of use is populated, so the work comes in small pieces as use grows.
  uint8_t* base = memory_.data();
  std::unique_lock lock(populate_mutex_);
  while (true) {
    populate_wake_.wait(lock, [&] {
      return stop_populating_ || populated_bytes_.load(std::memory_order_relaxed) < wanted_bytes_;
    });
    if (stop_populating_) break;
    const size_t target = wanted_bytes_;
    lock.unlock();
    bool supported = true;
    for (size_t offset = populated_bytes_.load(std::memory_order_relaxed); offset < target;
         offset += kPopulateChunk) {
      const size_t length = std::min(kPopulateChunk, target - offset);
#if defined(MADV_POPULATE_WRITE)
      supported = ::madvise(base + offset, length, MADV_POPULATE_WRITE) == 0;
#else
      supported = false;
#endif
      if (!supported) break;
      populated_bytes_.store(offset + length, std::memory_order_release);
    }
    lock.lock();
    if (!supported) {
      // Pages are faulted in on first touch from here on; nothing more to wait for.
      populated_bytes_.store(memory_.size(), std::memory_order_release);
      wanted_bytes_ = memory_.size();
    }
    populate_done_.notify_all();
    if (stop_populating_) break;
  }
  populate_done_.notify_all();
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
  NoteHandedOut(id);
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
