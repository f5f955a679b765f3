#include "kvcache/prefix_index.h"

#include <algorithm>

#include "core/error.h"

namespace reprise {

PrefixIndex::PrefixIndex(int64_t num_blocks, int block_size) : block_size_(block_size) {
  REPRISE_CHECK(block_size > 0, "block_size must be positive, got {}", block_size);
  REPRISE_CHECK(num_blocks > 0, "num_blocks must be positive, got {}", num_blocks);
  nodes_.resize(static_cast<size_t>(num_blocks));
  tokens_.assign(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size), 0);
  by_key_.reserve(static_cast<size_t>(num_blocks));
}

std::optional<BlockId> PrefixIndex::Find(const Digest& key) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::span<const int32_t> PrefixIndex::Tokens(BlockId id) const {
  return {tokens_.data() + static_cast<size_t>(id) * static_cast<size_t>(block_size_),
          static_cast<size_t>(node(id).num_tokens)};
}

void PrefixIndex::Insert(BlockId id, const Digest& key, BlockId parent, const Digest& extras_digest,
                         std::span<const int32_t> tokens) {
  REPRISE_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size(), "bad block id {}", id);
  REPRISE_CHECK(!tokens.empty() && tokens.size() <= static_cast<size_t>(block_size_),
                "a block holds 1..{} tokens, got {}", block_size_, tokens.size());
  Node& n = node(id);
  REPRISE_CHECK(!n.indexed, "block {} is already indexed", id);
  if (parent != kNoBlock) {
    const Node& p = node(parent);
    REPRISE_CHECK(p.indexed && p.num_tokens == block_size_,
                  "parent {} of block {} must be an indexed full block", parent, id);
    REPRISE_CHECK(p.extras == extras_digest, "block {} has other extra keys than its parent {}", id,
                  parent);
  }
  auto [it, inserted] = by_key_.emplace(key, id);
  REPRISE_CHECK(inserted, "key of block {} is already indexed (block {})", id, it->second);

  n = Node{};
  n.key = key;
  n.extras = extras_digest;
  n.parent = parent;
  n.num_tokens = static_cast<int32_t>(tokens.size());
  n.indexed = true;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(id) * block_size_);

  // Link as the newest child.
  Children& list = parent == kNoBlock ? roots_[extras_digest] : node(parent).children;
  n.next_sibling = list.head;
  if (list.head != kNoBlock) node(list.head).prev_sibling = id;
  list.head = id;
  ++list.count;
  if (tokens.size() < static_cast<size_t>(block_size_)) ++list.tails;
}

void PrefixIndex::Remove(BlockId id) {
  Node& n = node(id);
  REPRISE_CHECK(n.indexed, "block {} is not indexed", id);
  REPRISE_CHECK(n.children.count == 0, "block {} still has {} children", id, n.children.count);
  by_key_.erase(n.key);
  auto root = roots_.end();
  Children* list;
  if (n.parent != kNoBlock) {
    list = &node(n.parent).children;
  } else {
    root = roots_.find(n.extras);
    REPRISE_CHECK(root != roots_.end(), "root list of block {} is missing", id);
    list = &root->second;
  }
  if (n.next_sibling != kNoBlock) node(n.next_sibling).prev_sibling = n.prev_sibling;
  if (n.prev_sibling != kNoBlock) {
    node(n.prev_sibling).next_sibling = n.next_sibling;
  } else {
    REPRISE_CHECK(list->head == id, "sibling list of block {} is broken", id);
    list->head = n.next_sibling;
  }
  --list->count;
  if (n.num_tokens < block_size_) --list->tails;
  if (root != roots_.end() && root->second.count == 0) roots_.erase(root);
  n = Node{};
}

const PrefixIndex::Children* PrefixIndex::ChildrenOf(BlockId parent,
                                                     const Digest& extras_digest) const {
  if (parent != kNoBlock) return &node(parent).children;
  auto it = roots_.find(extras_digest);
  return it == roots_.end() ? nullptr : &it->second;
}

BlockId PrefixIndex::FirstChild(BlockId parent, const Digest& extras_digest) const {
  const Children* list = ChildrenOf(parent, extras_digest);
  return list == nullptr ? kNoBlock : list->head;
}

int32_t PrefixIndex::NumTailChildren(BlockId parent, const Digest& extras_digest) const {
  const Children* list = ChildrenOf(parent, extras_digest);
  return list == nullptr ? 0 : list->tails;
}

std::pair<BlockId, size_t> PrefixIndex::LongestPartialMatch(BlockId parent,
                                                            const Digest& extras_digest,
                                                            std::span<const int32_t> tokens) const {
  size_t limit = std::min(tokens.size(), static_cast<size_t>(block_size_));
  BlockId best = kNoBlock;
  size_t best_length = 0;
  for (BlockId child = FirstChild(parent, extras_digest); child != kNoBlock;
       child = NextSibling(child)) {
    std::span<const int32_t> cached = Tokens(child);
    size_t n = std::min(limit, cached.size());
    size_t length = 0;
    while (length < n && cached[length] == tokens[length]) ++length;
    if (length > best_length) {
      best = child;
      best_length = length;
      if (best_length == limit) break;
    }
  }
  return {best, best_length};
}

}  // namespace reprise
