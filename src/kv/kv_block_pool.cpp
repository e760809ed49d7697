#include "kv/kv_block_pool.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/fault_injection.hpp"

namespace cortiq {

namespace {

// splitmix64's finalizer: every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t prefix_block_key(uint64_t parent_key, std::span<const TokenId> tokens) {
  uint64_t h = mix(parent_key);
  for (const TokenId t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

KvBlockPool::KvBlockPool(int32_t n_blocks, int32_t block_size)
    : block_size_(block_size),
      blocks_(static_cast<size_t>(n_blocks)),
      tokens_(static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size)) {
  free_.reserve(static_cast<size_t>(n_blocks));
  // Registration happens once per filled block; no rehash on the decode path.
  by_key_.reserve(static_cast<size_t>(n_blocks));
  reset();
}

int32_t KvBlockPool::take() {
  fault::hit(fault::Site::kv_block);
  int32_t block = -1;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (oldest_cached_ >= 0) {
    block = oldest_cached_;
    unlink_cached(block);
    erase_registration(block);
  } else {
    throw Error("KV cache full: no block available");
  }
  blocks_[static_cast<size_t>(block)].refcount = 1;
  return block;
}

void KvBlockPool::retain(int32_t block) {
  auto& b = blocks_[static_cast<size_t>(block)];
  if (b.refcount == 0) unlink_cached(block);
  ++b.refcount;
}

void KvBlockPool::release(int32_t block) {
  auto& b = blocks_[static_cast<size_t>(block)];
  if (--b.refcount > 0) return;
  if (b.prefix_id != kNoPrefixId) {
    push_newest_cached(block);
  } else {
    free_.push_back(block);
  }
}

std::span<const TokenId> KvBlockPool::stored_tokens(int32_t block) const {
  return std::span<const TokenId>(tokens_).subspan(
      static_cast<size_t>(block) * static_cast<size_t>(block_size_),
      static_cast<size_t>(block_size_));
}

bool KvBlockPool::holds(int32_t block, uint64_t parent_id, std::span<const TokenId> tokens) const {
  const auto stored = stored_tokens(block);
  return blocks_[static_cast<size_t>(block)].parent_id == parent_id &&
         std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end());
}

uint64_t KvBlockPool::register_block(int32_t block, uint64_t key, uint64_t parent_id,
                                     std::span<const TokenId> tokens) {
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    const int32_t owner = it->second;
    return holds(owner, parent_id, tokens) ? prefix_id(owner) : kNoPrefixId;
  }
  auto& b = blocks_[static_cast<size_t>(block)];
  b.prefix_id = next_prefix_id_++;
  b.key = key;
  b.parent_id = parent_id;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
  by_key_.emplace(key, block);
  return b.prefix_id;
}

int32_t KvBlockPool::find(uint64_t key, uint64_t parent_id, std::span<const TokenId> tokens) const {
  const auto it = by_key_.find(key);
  if (it == by_key_.end() || !holds(it->second, parent_id, tokens)) return -1;
  return it->second;
}

void KvBlockPool::unregister(int32_t block) {
  auto& b = blocks_[static_cast<size_t>(block)];
  if (b.prefix_id == kNoPrefixId) return;
  if (b.refcount == 0) {
    unlink_cached(block);
    free_.push_back(block);
  }
  erase_registration(block);
}

void KvBlockPool::erase_registration(int32_t block) {
  auto& b = blocks_[static_cast<size_t>(block)];
  by_key_.erase(b.key);
  b.prefix_id = kNoPrefixId;
  b.parent_id = kNoPrefixId;
  b.key = 0;
}

void KvBlockPool::push_newest_cached(int32_t block) {
  auto& b = blocks_[static_cast<size_t>(block)];
  b.older = newest_cached_;
  b.newer = -1;
  if (newest_cached_ >= 0) {
    blocks_[static_cast<size_t>(newest_cached_)].newer = block;
  } else {
    oldest_cached_ = block;
  }
  newest_cached_ = block;
  ++n_cached_;
}

void KvBlockPool::unlink_cached(int32_t block) {
  auto& b = blocks_[static_cast<size_t>(block)];
  if (b.older >= 0) {
    blocks_[static_cast<size_t>(b.older)].newer = b.newer;
  } else {
    oldest_cached_ = b.newer;
  }
  if (b.newer >= 0) {
    blocks_[static_cast<size_t>(b.newer)].older = b.older;
  } else {
    newest_cached_ = b.older;
  }
  b.older = b.newer = -1;
  --n_cached_;
}

void KvBlockPool::reset() {
  std::fill(blocks_.begin(), blocks_.end(), Block{});
  free_.clear();
  for (int32_t b = n_blocks(); b-- > 0;) free_.push_back(b);
  oldest_cached_ = newest_cached_ = -1;
  n_cached_ = 0;
  by_key_.clear();
}

}  // namespace cortiq
