// PrefixIndex: the tree of cached blocks (a radix tree whose edges are blocks). Full blocks are
// found by key; a node's children are listed so the longest partial match into the next block
// can be found token by token. Bookkeeping only: it never touches KV memory or ref counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/sha256.h"
#include "kvcache/block_pool.h"

namespace reprise {

class PrefixIndex {
 public:
  PrefixIndex(int64_t num_blocks, int block_size);

  int block_size() const { return block_size_; }
  size_t size() const { return by_key_.size(); }

  // The indexed block with this key, if any.
  std::optional<BlockId> Find(const Digest& key) const;

  // Adds `id` under `parent` (kNoBlock: a first block; it is listed under its extras digest).
  // `tokens` has 1..block_size entries; fewer than block_size makes a partial (tail) block,
  // which can have no children. The key must not be indexed yet; a non-root parent must be a
  // full indexed block with the same extras.
  void Insert(BlockId id, const Digest& key, BlockId parent, const Digest& extras_digest,
              std::span<const int32_t> tokens);
  // Removes a block that has no children.
  void Remove(BlockId id);

  bool Contains(BlockId id) const { return node(id).indexed; }
  bool IsPartial(BlockId id) const { return node(id).num_tokens < block_size_; }
  const Digest& Key(BlockId id) const { return node(id).key; }
  const Digest& Extras(BlockId id) const { return node(id).extras; }
  BlockId Parent(BlockId id) const { return node(id).parent; }
  int32_t NumChildren(BlockId id) const { return node(id).children.count; }
  std::span<const int32_t> Tokens(BlockId id) const;

  // Children of `parent` (kNoBlock: first blocks with these extras), newest first.
  // Usage: for (BlockId c = FirstChild(p, e); c != kNoBlock; c = NextSibling(c)) ...
  BlockId FirstChild(BlockId parent, const Digest& extras_digest) const;
  BlockId NextSibling(BlockId id) const { return node(id).next_sibling; }
  // How many of those children are tails.
  int32_t NumTailChildren(BlockId parent, const Digest& extras_digest) const;

  // The child of `parent` whose tokens share the longest common prefix with `tokens`
  // (at most block_size of them are compared). Returns {kNoBlock, 0} when no child shares even
  // its first token. Ties go to the newest child.
  std::pair<BlockId, size_t> LongestPartialMatch(BlockId parent, const Digest& extras_digest,
                                                 std::span<const int32_t> tokens) const;

 private:
  struct Children {
    BlockId head = kNoBlock;  // newest; linked through next_sibling / prev_sibling
    int32_t count = 0;
    int32_t tails = 0;
  };
  struct Node {
    Digest key{};
    Digest extras{};  // ExtrasDigest of the request that committed it
    BlockId parent = kNoBlock;
    BlockId prev_sibling = kNoBlock;
    BlockId next_sibling = kNoBlock;
    Children children;
    int32_t num_tokens = 0;
    bool indexed = false;
  };

  const Node& node(BlockId id) const { return nodes_[static_cast<size_t>(id)]; }
  Node& node(BlockId id) { return nodes_[static_cast<size_t>(id)]; }
  const Children* ChildrenOf(BlockId parent, const Digest& extras_digest) const;

  int block_size_;
  std::vector<Node> nodes_;      // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks][block_size]; the first num_tokens are valid
  std::unordered_map<Digest, BlockId, DigestHash> by_key_;  // every indexed block
  // First blocks have no parent node: their lists hang here, one per extras digest (an entry
  // exists only while its list is not empty).
  std::unordered_map<Digest, Children, DigestHash> roots_;
};

}  // namespace reprise
