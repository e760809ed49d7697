// The rows of a KV cache's sliding-window layers, bounded by the window
// instead of the context. A row at position p of such a layer attends to
// positions [p - window + 1, p] only, so once a sequence's forward pass is
// committed, no later row sees its positions below length - window + 1.
// Those blocks go back to the free list, except for n_ubatch positions'
// worth below the window: a cut of up to n_ubatch positions below the
// length the last pass left (that pass undone, a reply's last tokens
// regenerated, a rejected draft) still finds every row it needs. During a pass a sequence also
// holds at most n_ubatch new positions (the most one pass appends), so every sequence gets
// blocks_per_sequence() blocks whatever the context.
//
// Positions map to blocks as in the full layers (a sequence's block b holds
// its positions [b*B, b*B+B)); blocks are never shared, so these rows take
// no part in the prefix cache. A deeper cut cannot be served
// (can_truncate): the caller forwards the positions again.
//
// Not thread-safe: one owner thread, like the KvCache that holds it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cortiq {

class KvWindowRows {
 public:
  // Rows for n_seq sequences of up to max_length positions each.
  KvWindowRows(int32_t n_seq, int64_t window, int64_t n_ubatch, int32_t block_size,
               int64_t max_length);

  // Blocks one sequence may hold at once: window - 1 positions, n_ubatch
  // kept for cuts, the next pass's n_ubatch, and the part of a block before
  // the oldest kept one.
  static int64_t blocks_per_sequence(int64_t window, int64_t n_ubatch, int32_t block_size);

  int64_t window() const { return window_; }
  int64_t n_ubatch() const { return n_ubatch_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t n_free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t n_cells() const { return n_blocks_ * block_size_; }

  // Whether appending n positions to the sequence keeps it within its
  // blocks_per_sequence().
  bool can_append(int32_t seq, int64_t n) const;
  // Gives the sequence n more positions (check can_append first).
  void append(int32_t seq, int64_t n);
  // The cell of every position of the sequence; the cells of released
  // positions are stale (never read: they are outside every row's window).
  std::span<const int32_t> cells(int32_t seq) const { return seqs_[index(seq)].cells; }
  // The first position whose rows are still held.
  int64_t first_held(int32_t seq) const;
  // Frees the blocks whose positions no later row can see, nor any cut back
  // by up to n_ubatch positions.
  void release_unseen(int32_t seq);
  // Whether a cut back to `length` positions leaves every row the next
  // position attends to.
  bool can_truncate(int32_t seq, int64_t length) const;
  // Cuts the sequence back (check can_truncate first).
  void truncate(int32_t seq, int64_t length);
  // Every sequence empty, every block free.
  void clear_all();

 private:
  struct Sequence {
    std::vector<int32_t> blocks;  // by block index; kReleased once freed
    std::vector<int32_t> cells;   // by position
    size_t first_held_block = 0;
  };
  static constexpr int32_t kReleased = -1;

  size_t index(int32_t seq) const { return static_cast<size_t>(seq); }
  int64_t length(const Sequence& s) const { return static_cast<int64_t>(s.cells.size()); }
  // New blocks appending n positions takes.
  int64_t blocks_needed(const Sequence& s, int64_t n) const;
  void release_blocks(Sequence& s, size_t from, size_t to);

  int64_t window_;
  int64_t n_ubatch_;
  int32_t block_size_;
  int64_t per_sequence_ = 0;  // blocks_per_sequence()
  int64_t n_blocks_ = 0;
  std::vector<Sequence> seqs_;
  std::vector<int32_t> free_;  // a stack
};

}  // namespace cortiq
