// IndexedHeap: a binary min-heap of block ids with a key each, where any id can be found,
// re-keyed or removed in O(log n). Sized once for a pool; never allocates afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kvcache/block_pool.h"

namespace reprise {

template <typename Key>  // ordered by operator<; equal keys pop in no particular order
class IndexedHeap {
 public:
  explicit IndexedHeap(int64_t num_blocks) : position_(static_cast<size_t>(num_blocks), kAbsent) {
    heap_.reserve(static_cast<size_t>(num_blocks));
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  bool Contains(BlockId id) const { return position_[Index(id)] != kAbsent; }
  BlockId Top() const { return heap_.front().id; }
  const Key& TopKey() const { return heap_.front().key; }
  const Key& KeyOf(BlockId id) const { return heap_[position_[Index(id)]].key; }

  void Push(BlockId id, const Key& key) {
    REPRISE_CHECK(!Contains(id), "block {} is already in the heap", id);
    heap_.push_back({key, id});
    position_[Index(id)] = heap_.size() - 1;
    SiftUp(heap_.size() - 1);
  }

  void Erase(BlockId id) {
    REPRISE_CHECK(Contains(id), "block {} is not in the heap", id);
    size_t at = position_[Index(id)];
    position_[Index(id)] = kAbsent;
    size_t last = heap_.size() - 1;
    if (at != last) {
      heap_[at] = heap_[last];
      position_[Index(heap_[at].id)] = at;
    }
    heap_.pop_back();
    if (at < heap_.size()) Restore(at);
  }

  void Update(BlockId id, const Key& key) {
    size_t at = position_[Index(id)];
    REPRISE_CHECK(at != kAbsent, "block {} is not in the heap", id);
    heap_[at].key = key;
    Restore(at);
  }

 private:
  struct Entry {
    Key key;
    BlockId id;
  };
  static constexpr size_t kAbsent = static_cast<size_t>(-1);

  static size_t Index(BlockId id) { return static_cast<size_t>(id); }

  void Restore(size_t at) {
    if (at > 0 && heap_[at].key < heap_[(at - 1) / 2].key) {
      SiftUp(at);
    } else {
      SiftDown(at);
    }
  }

  void Swap(size_t a, size_t b) {
    std::swap(heap_[a], heap_[b]);
    position_[Index(heap_[a].id)] = a;
    position_[Index(heap_[b].id)] = b;
  }

  void SiftUp(size_t at) {
    while (at > 0) {
      size_t parent = (at - 1) / 2;
      if (!(heap_[at].key < heap_[parent].key)) break;
      Swap(at, parent);
      at = parent;
    }
  }

  void SiftDown(size_t at) {
    for (;;) {
      size_t smallest = at;
      size_t left = 2 * at + 1;
      size_t right = left + 1;
      if (left < heap_.size() && heap_[left].key < heap_[smallest].key) smallest = left;
      if (right < heap_.size() && heap_[right].key < heap_[smallest].key) smallest = right;
      if (smallest == at) return;
      Swap(at, smallest);
      at = smallest;
    }
  }

  std::vector<Entry> heap_;       // heap order, capacity num_blocks
  std::vector<size_t> position_;  // [num_blocks] index into heap_, kAbsent when not in it
};

}  // namespace reprise
