#include "runtime/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "kernels/cpu/convert.hpp"

namespace cortiq {

namespace {

void validate(const KvCacheShape& s) {
  if (s.n_layer <= 0 || s.k_width <= 0 || s.v_width <= 0 || s.n_cells <= 0 || s.n_seq <= 0) {
    throw Error("invalid KV cache shape: every size must be positive");
  }
  if (s.n_cells > INT32_MAX) throw Error("KV cache: too many cells");
}

}  // namespace

uint64_t KvCache::bytes_needed(const KvCacheShape& s) {
  const uint64_t elem = s.type == KvType::f16 ? 2 : 4;
  return static_cast<uint64_t>(s.n_layer) * static_cast<uint64_t>(s.n_cells) *
         static_cast<uint64_t>(s.k_width + s.v_width) * elem;
}

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  validate(shape_);
  const size_t per_layer_k = static_cast<size_t>(shape_.n_cells * shape_.k_width) * element_bytes();
  const size_t per_layer_v = static_cast<size_t>(shape_.n_cells * shape_.v_width) * element_bytes();
  try {
    k_data_.resize(per_layer_k * static_cast<size_t>(shape_.n_layer));
    v_data_.resize(per_layer_v * static_cast<size_t>(shape_.n_layer));
  } catch (const std::bad_alloc&) {
    throw Error("not enough memory for the KV cache: it needs " +
                human_bytes(bytes_needed(shape_)) + " (reduce the context with -c)");
  }
  seq_cells_.resize(static_cast<size_t>(shape_.n_seq));
  clear_all();
}

void KvCache::check_seq(int32_t seq) const {
  if (seq < 0 || seq >= shape_.n_seq) {
    throw Error(
        strfmt("KV cache: sequence %d out of range (the cache holds %d)", seq, shape_.n_seq));
  }
}

int64_t KvCache::length(int32_t seq) const {
  check_seq(seq);
  return static_cast<int64_t>(seq_cells_[static_cast<size_t>(seq)].size());
}

std::span<const int32_t> KvCache::cells(int32_t seq) const {
  check_seq(seq);
  return seq_cells_[static_cast<size_t>(seq)];
}

std::span<const int32_t> KvCache::append(int32_t seq, int64_t n) {
  check_seq(seq);
  if (n < 0 || n > n_free()) {
    throw Error(strfmt("KV cache full: %lld more positions needed, %lld free of %lld",
                       static_cast<long long>(n), static_cast<long long>(n_free()),
                       static_cast<long long>(shape_.n_cells)));
  }
  auto& cells = seq_cells_[static_cast<size_t>(seq)];
  const size_t start = cells.size();
  for (int64_t i = 0; i < n; ++i) {
    cells.push_back(free_cells_.back());
    free_cells_.pop_back();
  }
  return std::span<const int32_t>(cells).subspan(start);
}

void KvCache::truncate(int32_t seq, int64_t length) {
  check_seq(seq);
  auto& cells = seq_cells_[static_cast<size_t>(seq)];
  if (length < 0) length = 0;
  while (static_cast<int64_t>(cells.size()) > length) {
    free_cells_.push_back(cells.back());
    cells.pop_back();
  }
}

void KvCache::clear_all() {
  for (auto& cells : seq_cells_) {
    cells.clear();
  }
  free_cells_.clear();
  free_cells_.reserve(static_cast<size_t>(shape_.n_cells));
  for (int64_t c = shape_.n_cells; c-- > 0;) free_cells_.push_back(static_cast<int32_t>(c));
  for (auto& cells : seq_cells_) cells.reserve(static_cast<size_t>(shape_.n_cells));
}

std::byte* KvCache::k_row(int64_t layer, int32_t cell) {
  return k_data_.data() + (static_cast<size_t>(layer * shape_.n_cells + cell) *
                           static_cast<size_t>(shape_.k_width)) *
                              element_bytes();
}

std::byte* KvCache::v_row(int64_t layer, int32_t cell) {
  return v_data_.data() + (static_cast<size_t>(layer * shape_.n_cells + cell) *
                           static_cast<size_t>(shape_.v_width)) *
                              element_bytes();
}

void KvCache::store(std::byte* dst, std::span<const float> row, int64_t width) {
  if (static_cast<int64_t>(row.size()) != width) throw Error("KV cache: row width mismatch");
  if (shape_.type == KvType::f32) {
    std::memcpy(dst, row.data(), row.size_bytes());
  } else {
    kernels::fp32_to_fp16_row(row, {reinterpret_cast<uint16_t*>(dst), row.size()});
  }
}

void KvCache::store_k(int64_t layer, int32_t cell, std::span<const float> row) {
  store(k_row(layer, cell), row, shape_.k_width);
}

void KvCache::store_v(int64_t layer, int32_t cell, std::span<const float> row) {
  store(v_row(layer, cell), row, shape_.v_width);
}

kernels::KvRowsView KvCache::keys(int64_t layer, int32_t seq) const {
  check_seq(seq);
  return {k_data_.data() + static_cast<size_t>(layer * shape_.n_cells) *
                               static_cast<size_t>(shape_.k_width) * element_bytes(),
          static_cast<size_t>(shape_.k_width) * element_bytes(), shape_.type == KvType::f16,
          seq_cells_[static_cast<size_t>(seq)]};
}

kernels::KvRowsView KvCache::values(int64_t layer, int32_t seq) const {
  check_seq(seq);
  return {v_data_.data() + static_cast<size_t>(layer * shape_.n_cells) *
                               static_cast<size_t>(shape_.v_width) * element_bytes(),
          static_cast<size_t>(shape_.v_width) * element_bytes(), shape_.type == KvType::f16,
          seq_cells_[static_cast<size_t>(seq)]};
}

}  // namespace cortiq
