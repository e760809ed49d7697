// The bookkeeping of the paged KV cache's blocks, apart from their rows:
// how many sequences hold each block, which blocks are free, which are
// cached (held by no one but kept for their registered content) in the
// order they were released, and the registry that finds a full block by
// the tokens of its prefix.
//
// A registered block is named by a prefix id, never reused, that stands for
// its whole prefix: the block's own tokens after the prefix its parent id
// names. A lookup checks the stored tokens and parent id, so two prefixes
// whose 64-bit keys collide can never be confused.
//
// Not thread-safe: one owner thread, like the KvCache that holds it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cortiq/types.hpp"

namespace cortiq {

// The key of a full block: a hash of its parent's key (kEmptyPrefixKey for
// the first block) and its tokens, so the key covers the whole prefix.
inline constexpr uint64_t kEmptyPrefixKey = 0;
uint64_t prefix_block_key(uint64_t parent_key, std::span<const TokenId> tokens);

class KvBlockPool {
 public:
  // Prefix ids: kNoPrefixId names nothing; kEmptyPrefixId is the parent of
  // every first block; registrations count up from there.
  static constexpr uint64_t kNoPrefixId = 0;
  static constexpr uint64_t kEmptyPrefixId = 1;

  // Every block starts free.
  KvBlockPool(int32_t n_blocks, int32_t block_size);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_cached() const { return n_cached_; }
  int32_t n_used() const { return n_blocks() - n_free() - n_cached(); }
  int32_t n_available() const { return n_free() + n_cached(); }
  int32_t refcount(int32_t block) const { return blocks_[static_cast<size_t>(block)].refcount; }

  // An available block for one holder: a free one first, else the least
  // recently released cached one, which loses its registration. Throws
  // cortiq::Error when none is available (callers count first).
  int32_t take();
  // One more holder; a cached block leaves the cached list.
  void retain(int32_t block);
  // One fewer holder; the last one leaves the block cached (newest) when it
  // is registered, free otherwise.
  void release(int32_t block);

  // Registers an unregistered full block holding `tokens` after the prefix
  // `parent_id` names, under `key`, and returns its new prefix id. When the
  // key is taken, returns the taken block's id if it holds the same content
  // (the block stays unregistered: a duplicate), else kNoPrefixId.
  uint64_t register_block(int32_t block, uint64_t key, uint64_t parent_id,
                          std::span<const TokenId> tokens);
  // The registered block under `key` holding exactly `tokens` after
  // `parent_id`, or -1.
  int32_t find(uint64_t key, uint64_t parent_id, std::span<const TokenId> tokens) const;
  // The block's prefix id, kNoPrefixId when it is not registered.
  uint64_t prefix_id(int32_t block) const { return blocks_[static_cast<size_t>(block)].prefix_id; }
  // Forgets the block's registration (its content is about to change); a
  // cached block becomes free.
  void unregister(int32_t block);

  // Every block free, nothing registered.
  void reset();

 private:
  struct Block {
    int32_t refcount = 0;
    uint64_t prefix_id = kNoPrefixId;
    uint64_t key = 0;
    uint64_t parent_id = kNoPrefixId;
    int32_t older = -1;  // neighbours in the cached list
    int32_t newer = -1;
  };

  std::span<const TokenId> stored_tokens(int32_t block) const;
  bool holds(int32_t block, uint64_t parent_id, std::span<const TokenId> tokens) const;
  void erase_registration(int32_t block);
  void push_newest_cached(int32_t block);
  void unlink_cached(int32_t block);

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<TokenId> tokens_;  // [block][block_size]: a registered block's tokens
  std::vector<int32_t> free_;    // a stack: lowest block on top after reset
  int32_t oldest_cached_ = -1;
  int32_t newest_cached_ = -1;
  int32_t n_cached_ = 0;
  std::unordered_map<uint64_t, int32_t> by_key_;
  uint64_t next_prefix_id_ = kEmptyPrefixId + 1;
};

}  // namespace cortiq
