// BlockPool: the KV memory of the cache (one allocation of fixed-size blocks), their reference
// counts and the stack of empty blocks. It knows nothing of keys or eviction (see PrefixCache).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/aligned_buffer.h"

namespace reprise {

using BlockId = int32_t;
inline constexpr BlockId kNoBlock = -1;

class BlockPool {
 public:
  // All blocks start empty (on the free stack) with ref count 0 and zeroed memory. Memory is
  // taken as it is needed: fresh blocks are handed out lowest id first, and a thread faults in
  // only a window of memory ahead of the highest block handed out so far (see PopulateMemory),
  // so requests do not pay for page faults and an idle pool holds little more than the window.
  BlockPool(int64_t num_blocks, size_t block_bytes);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Waits until the memory asked for so far is resident (or the kernel cannot populate it ahead
  // of use, where pages are faulted in on first touch instead).
  void FinishPopulating();
  // Bytes at the start of the pool made resident ahead of use so far.
  size_t PopulatedBytes() const { return populated_bytes_.load(std::memory_order_acquire); }
  // How far ahead of the highest block handed out the memory is made resident.
  size_t PopulateWindowBytes() const { return window_bytes_; }

  // How many blocks of `block_bytes` fit in `budget_bytes` (at most INT32_MAX, ids are int32).
  static int64_t NumBlocksForBudget(size_t budget_bytes, size_t block_bytes);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_count_.size()); }
  size_t block_bytes() const { return block_bytes_; }

  // The block's bytes; the layout inside a block belongs to the model.
  uint8_t* BlockData(BlockId id) { return memory_.data() + Offset(id); }
  const uint8_t* BlockData(BlockId id) const { return memory_.data() + Offset(id); }
  // Copies all block_bytes of `src` into `dst` (a named costly operation).
  void CopyBlock(BlockId dst, BlockId src);

  int32_t RefCount(BlockId id) const { return ref_count_[Checked(id)]; }
  void AddRef(BlockId id) { ++ref_count_[Checked(id)]; }
  // Returns the new count; dropping a reference that is not held is a programmer error.
  int32_t DropRef(BlockId id);

  // Empty blocks: ref count 0 and holding nothing anyone can find. Popped in a deterministic
  // order: 0, 1, 2, ... at first, then the most recently pushed first.
  std::optional<BlockId> PopFree();
  void PushFree(BlockId id);
  size_t NumFree() const { return free_.size(); }
  bool IsFree(BlockId id) const { return is_free_[Checked(id)] != 0; }

 private:
  // The populating thread: faults in memory up to wanted_bytes_, a chunk at a time, then waits
  // to be asked for more.
  void PopulateMemory();
  // Called when block `id` is handed out: asks for the window beyond it when it comes close.
  void NoteHandedOut(BlockId id);

  size_t Checked(BlockId id) const;
  size_t Offset(BlockId id) const { return Checked(id) * block_bytes_; }

  size_t block_bytes_;
  AlignedBuffer<uint8_t> memory_;   // [num_blocks][block_bytes]
  std::vector<int32_t> ref_count_;  // [num_blocks]
  std::vector<uint8_t> is_free_;    // [num_blocks] 1 while on free_
  std::vector<BlockId> free_;       // stack, capacity num_blocks; top = back()
  size_t window_bytes_ = 0;
  size_t asked_bytes_ = 0;     // the step thread's copy of wanted_bytes_: no lock on the fast path
  std::mutex populate_mutex_;  // guards wanted_bytes_ and stop_populating_
  std::condition_variable populate_wake_;
  std::condition_variable populate_done_;
  size_t wanted_bytes_ = 0;
  bool stop_populating_ = false;
  std::atomic<size_t> populated_bytes_{0};
  std::thread populating_;
};

}  // namespace reprise
