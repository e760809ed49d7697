// The key/value cache: per layer, one row of keys and one row of values per
// cell, in f32 or f16. Several sequences share the cells; each sequence owns
// the cells of its positions 0..length-1, in order (a block table of
// single-cell blocks), so a sequence can grow, be cut back to a prefix or be
// dropped without touching the others.
//
// Every token enters the cache exactly once: the forward pass appends the
// rows of a batch (append), writes their keys and values layer by layer, and
// attention reads positions [0, pos] of the row's sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/attention.hpp"

namespace cortiq {

enum class KvType { f32, f16 };

struct KvCacheShape {
  int64_t n_layer = 0;
  int64_t k_width = 0;  // n_head_kv * head_dim_k
  int64_t v_width = 0;  // n_head_kv * head_dim_v
  int64_t n_cells = 0;  // total positions over all sequences
  int32_t n_seq = 1;    // sequences that can live in the cache at once
  KvType type = KvType::f16;
};

class KvCache {
 public:
  // Allocates n_layer * n_cells * (k_width + v_width) elements up front;
  // throws cortiq::Error when the shape is invalid or the memory is not there.
  explicit KvCache(const KvCacheShape& shape);

  // Bytes the cache of this shape takes.
  static uint64_t bytes_needed(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  int64_t n_free() const { return static_cast<int64_t>(free_cells_.size()); }
  int64_t n_used() const { return shape_.n_cells - n_free(); }

  int64_t length(int32_t seq) const;
  // The cell of every position of the sequence, in position order.
  std::span<const int32_t> cells(int32_t seq) const;

  // Gives the sequence n more positions (length .. length+n-1) and returns
  // their cells. Throws cortiq::Error, changing nothing, when fewer than n
  // cells are free.
  std::span<const int32_t> append(int32_t seq, int64_t n);
  // Cuts the sequence back to its first `length` positions.
  void truncate(int32_t seq, int64_t length);
  void clear(int32_t seq) { truncate(seq, 0); }
  void clear_all();

  // Stores one row of keys / values (k_width / v_width floats) in a cell.
  void store_k(int64_t layer, int32_t cell, std::span<const float> row);
  void store_v(int64_t layer, int32_t cell, std::span<const float> row);

  // The cached rows of a sequence in one layer, for attention.
  kernels::KvRowsView keys(int64_t layer, int32_t seq) const;
  kernels::KvRowsView values(int64_t layer, int32_t seq) const;

 private:
  void check_seq(int32_t seq) const;
  size_t element_bytes() const { return shape_.type == KvType::f16 ? 2 : 4; }
  std::byte* k_row(int64_t layer, int32_t cell);
  std::byte* v_row(int64_t layer, int32_t cell);
  void store(std::byte* dst, std::span<const float> row, int64_t width);

  KvCacheShape shape_;
  std::vector<std::byte> k_data_;  // [layer][cell][k_width]
  std::vector<std::byte> v_data_;  // [layer][cell][v_width]
  std::vector<std::vector<int32_t>> seq_cells_;
  std::vector<int32_t> free_cells_;  // a stack: lowest cell on top
};

}  // namespace cortiq
