#include "kv/kv_window_rows.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace cortiq {

int64_t KvWindowRows::blocks_per_sequence(int64_t window, int64_t n_ubatch, int32_t block_size) {
  // Held positions start on a block boundary up to block_size - 1 before
  // the oldest one kept (length - window + 1 - n_ubatch).
  const int64_t span = (window - 1) + n_ubatch + (block_size - 1) + n_ubatch;
  return (span + block_size - 1) / block_size;
}

KvWindowRows::KvWindowRows(int32_t n_seq, int64_t window, int64_t n_ubatch, int32_t block_size,
                           int64_t max_length)
    : window_(window), n_ubatch_(n_ubatch), block_size_(block_size) {
  if (n_seq <= 0 || window <= 0 || n_ubatch <= 0 || block_size <= 0 || max_length <= 0) {
    throw Error("invalid sliding-window KV shape: every size must be positive");
  }
  per_sequence_ = blocks_per_sequence(window, n_ubatch, block_size);
  n_blocks_ = static_cast<int64_t>(n_seq) * per_sequence_;
  if (n_blocks_ * block_size > INT32_MAX) throw Error("KV cache: too many cells");
  seqs_.resize(static_cast<size_t>(n_seq));
  const auto max_blocks = static_cast<size_t>((max_length + block_size - 1) / block_size);
  for (Sequence& s : seqs_) {
    // Reserved once, so the decode path never grows them.
    s.blocks.reserve(max_blocks);
    s.cells.reserve(max_blocks * static_cast<size_t>(block_size));
  }
  clear_all();
}

int64_t KvWindowRows::blocks_needed(const Sequence& s, int64_t n) const {
  const int64_t len = length(s);
  const int64_t room = (block_size_ - len % block_size_) % block_size_;
  return n <= room ? 0 : (n - room + block_size_ - 1) / block_size_;
}

bool KvWindowRows::can_append(int32_t seq, int64_t n) const {
  // Each sequence stays within its share, so no sequence can starve another.
  const Sequence& s = seqs_[index(seq)];
  const auto held = static_cast<int64_t>(s.blocks.size() - s.first_held_block);
  return held + blocks_needed(s, n) <= per_sequence_ && blocks_needed(s, n) <= n_free_blocks();
}

void KvWindowRows::append(int32_t seq, int64_t n) {
  Sequence& s = seqs_[index(seq)];
  if (!can_append(seq, n)) throw Error("KV cache: the sliding-window layers' blocks are used up");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t offset = length(s) % block_size_;
    if (offset == 0) {
      s.blocks.push_back(free_.back());
      free_.pop_back();
    }
    s.cells.push_back(s.blocks.back() * block_size_ + static_cast<int32_t>(offset));
  }
}

int64_t KvWindowRows::first_held(int32_t seq) const {
  return static_cast<int64_t>(seqs_[index(seq)].first_held_block) * block_size_;
}

void KvWindowRows::release_blocks(Sequence& s, size_t from, size_t to) {
  for (size_t b = from; b < to; ++b) {
    if (s.blocks[b] == kReleased) continue;
    free_.push_back(s.blocks[b]);
    s.blocks[b] = kReleased;
  }
}

void KvWindowRows::release_unseen(int32_t seq) {
  Sequence& s = seqs_[index(seq)];
  const int64_t oldest_kept = std::max<int64_t>(0, length(s) - window_ + 1 - n_ubatch_);
  const auto unseen_blocks = static_cast<size_t>(oldest_kept / block_size_);
  if (unseen_blocks <= s.first_held_block) return;
  release_blocks(s, s.first_held_block, unseen_blocks);
  s.first_held_block = unseen_blocks;
}

bool KvWindowRows::can_truncate(int32_t seq, int64_t length) const {
  const Sequence& s = seqs_[index(seq)];
  if (length <= 0 || length >= this->length(s)) return true;
  return first_held(seq) <= std::max<int64_t>(0, length - window_ + 1);
}

void KvWindowRows::truncate(int32_t seq, int64_t length) {
  Sequence& s = seqs_[index(seq)];
  const auto kept = static_cast<size_t>(std::max<int64_t>(length, 0));
  if (kept >= s.cells.size()) return;
  if (!can_truncate(seq, length)) {
    throw Error("KV cache: the sliding-window layers no longer hold the rows before the cut");
  }
  const size_t kept_blocks = (kept + static_cast<size_t>(block_size_) - 1) / block_size_;
  release_blocks(s, kept_blocks, s.blocks.size());
  s.blocks.resize(kept_blocks);
  s.cells.resize(kept);
  if (kept == 0) s.first_held_block = 0;
}

void KvWindowRows::clear_all() {
  for (Sequence& s : seqs_) {
    s.blocks.clear();
    s.cells.clear();
    s.first_held_block = 0;
  }
  free_.clear();
  // The lowest block on top, as the full layers' pool hands them out.
  for (int64_t b = n_blocks_; b-- > 0;) free_.push_back(static_cast<int32_t>(b));
}

}  // namespace cortiq
