#include "kv/kv_cache.hpp"

#include <algorithm>
#include <array>
#include <new>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq {

namespace {

// Validates the shape and returns the number of blocks it holds.
int32_t block_count(const KvCacheShape& s) {
  bool positive = !s.layers.empty() && s.n_cells > 0 && s.n_seq > 0 && s.block_size > 0;
  // A layer without attention (DeciLM's) keeps nothing: width 0.
  for (const KvLayerShape& layer : s.layers) {
    positive = positive && layer.k_width >= 0 && layer.v_width >= 0 && layer.state_width >= 0;
  }
  positive = positive && s.n_prefix_states >= 0;
  if (!positive) throw Error("invalid KV cache shape: every size must be positive");
  const int64_t n_blocks = (s.n_cells + s.block_size - 1) / s.block_size;
  if (n_blocks * s.block_size > INT32_MAX) throw Error("KV cache: too many cells");
  return static_cast<int32_t>(n_blocks);
}

// Calls on_block(block, key, block_tokens) for each registered block that
// continues the chain over the full blocks of `tokens`, in order, and
// returns the positions they cover.
template <class OnBlock>
int64_t walk_cached_prefix(const KvBlockPool& pool, std::span<const TokenId> tokens,
                           OnBlock&& on_block) {
  const auto block_size = static_cast<size_t>(pool.block_size());
  uint64_t key = kEmptyPrefixKey;
  uint64_t parent_id = KvBlockPool::kEmptyPrefixId;
  size_t n = 0;
  for (; n + block_size <= tokens.size(); n += block_size) {
    const auto block_tokens = tokens.subspan(n, block_size);
    key = prefix_block_key(key, block_tokens);
    const int32_t block = pool.find(key, parent_id, block_tokens);
    if (block < 0) break;
    on_block(block, key, block_tokens);
    parent_id = pool.prefix_id(block);
  }
  return static_cast<int64_t>(n);
}

}  // namespace

KvCacheShape KvCacheShape::uniform(int64_t n_layer, int64_t k_width, int64_t v_width,
                                   int64_t n_cells, int32_t n_seq, KvType type,
                                   int32_t block_size) {
  KvCacheShape shape;
  shape.layers.assign(static_cast<size_t>(std::max<int64_t>(n_layer, 0)), {k_width, v_width});
  shape.n_cells = n_cells;
  shape.n_seq = n_seq;
  shape.type = type;
  shape.block_size = block_size;
  return shape;
}

int64_t KvCacheShape::bounded_window() const {
  int64_t window = 0;
  for (const KvLayerShape& layer : layers) window = std::max(window, layer.window);
  if (n_ubatch <= 0 || window <= 0 || block_size <= 0 || n_seq <= 0) return 0;
  const int64_t window_blocks =
      n_seq * KvWindowRows::blocks_per_sequence(window, n_ubatch, block_size);
  const int64_t full_blocks = (n_cells + block_size - 1) / block_size;
  return window_blocks < full_blocks ? window : 0;
}

namespace {

// Cells allocated for the full layers and for the bounded window layers.
struct CellCounts {
  int64_t full = 0;
  int64_t window = 0;
};

CellCounts cell_counts(const KvCacheShape& s) {
  CellCounts counts{static_cast<int64_t>(block_count(s)) * s.block_size, 0};
  if (const int64_t window = s.bounded_window()) {
    counts.window = s.n_seq * KvWindowRows::blocks_per_sequence(window, s.n_ubatch, s.block_size) *
                    s.block_size;
  }
  return counts;
}

}  // namespace

int64_t KvCacheShape::state_width() const {
  int64_t width = 0;
  for (const KvLayerShape& layer : layers) width += layer.state_width;
  return width;
}

uint64_t KvCache::bytes_needed(const KvCacheShape& s) {
  const uint64_t elem = s.type == KvType::f16 ? 2 : 4;
  const CellCounts cells = cell_counts(s);
  uint64_t bytes = 0;
  for (int64_t il = 0; il < s.n_layer(); ++il) {
    const KvLayerShape& layer = s.layers[static_cast<size_t>(il)];
    const int64_t n = s.is_bounded(il) ? cells.window : cells.full;
    bytes += static_cast<uint64_t>(n) * static_cast<uint64_t>(layer.k_width + layer.v_width);
  }
  const auto state_bytes = static_cast<uint64_t>(s.state_width()) * sizeof(float);
  const auto n_states = static_cast<uint64_t>(s.n_seq) + static_cast<uint64_t>(s.n_prefix_states);
  return bytes * elem + state_bytes * n_states;
}

KvCache::KvCache(const KvCacheShape& shape, const KvRowStorage::Factory& make_rows)
    : KvCache(shape, std::array{KvRowsPart{0, make_rows}}) {}

KvCache::KvCache(const KvCacheShape& shape, std::span<const KvRowsPart> parts)
    : shape_(shape), pool_(block_count(shape), shape.block_size) {
  if (parts.empty() || parts.front().first_layer != 0) {
    throw Error("KV cache: the first part of the rows' storage must start at layer 0");
  }
  const CellCounts cells = cell_counts(shape_);
  // Each part lays its layers out from offset 0 of its own storage.
  std::vector<std::pair<size_t, size_t>> part_bytes(parts.size());
  size_t part = 0;
  for (int64_t il = 0; il < shape_.n_layer(); ++il) {
    while (part + 1 < parts.size() && parts[part + 1].first_layer <= il) {
      if (parts[part + 1].first_layer <= parts[part].first_layer) {
        throw Error("KV cache: the parts of the rows' storage must start at increasing layers");
      }
      ++part;
    }
    auto& [k_bytes, v_bytes] = part_bytes[part];
    const KvLayerShape& layer = shape_.layers[static_cast<size_t>(il)];
    LayerStorage storage;
    storage.part = part;
    storage.in_window_rows = shape_.is_bounded(il);
    storage.k_offset = k_bytes;
    storage.v_offset = v_bytes;
    storage.k_row_bytes = static_cast<size_t>(layer.k_width) * element_bytes();
    storage.v_row_bytes = static_cast<size_t>(layer.v_width) * element_bytes();
    const auto n = static_cast<size_t>(storage.in_window_rows ? cells.window : cells.full);
    k_bytes += n * storage.k_row_bytes;
    v_bytes += n * storage.v_row_bytes;
    storage_.push_back(storage);
  }
  try {
    for (size_t i = 0; i < parts.size(); ++i) {
      parts_.push_back(parts[i].make(part_bytes[i].first, part_bytes[i].second));
    }
    size_t state_offset = 0;
    for (const KvLayerShape& layer : shape_.layers) {
      state_offsets_.push_back(state_offset);
      state_offset += static_cast<size_t>(layer.state_width);
    }
    state_.assign(state_offset * static_cast<size_t>(shape_.n_seq), 0.0f);
    if (state_offset > 0) {
      prefix_state_slots_.resize(static_cast<size_t>(shape_.n_prefix_states));
      prefix_state_data_.assign(state_offset * prefix_state_slots_.size(), 0.0f);
    }
    if (const int64_t window = shape_.bounded_window()) {
      window_.emplace(shape_.n_seq, window, shape_.n_ubatch, shape_.block_size, cells.full);
      window_cell_.assign(static_cast<size_t>(cells.full), 0);
    }
    sequences_.resize(static_cast<size_t>(shape_.n_seq));
    // Reserved once, so the decode path never grows them.
    for (auto& s : sequences_) {
      s.tokens.reserve(static_cast<size_t>(cells.full));
      s.cells.reserve(static_cast<size_t>(cells.full));
      s.blocks.reserve(static_cast<size_t>(n_blocks()));
      s.chain.reserve(static_cast<size_t>(n_blocks()));
    }
  } catch (const std::bad_alloc&) {
    throw Error("not enough memory for the KV cache: it needs " +
                human_bytes(bytes_needed(shape_)) + " (reduce the context with -c)");
  }
}

size_t KvCache::index_of(int32_t seq) const {
  if (seq < 0 || seq >= shape_.n_seq) {
    throw Error(
        strfmt("KV cache: sequence %d out of range (the cache holds %d)", seq, shape_.n_seq));
  }
  return static_cast<size_t>(seq);
}

int64_t KvCache::blocks_needed(int32_t seq, int64_t n) const {
  const int64_t len = length(seq);
  const int64_t block = block_size();
  const int64_t room = (block - len % block) % block;  // left in the last block
  return n <= room ? 0 : (n - room + block - 1) / block;
}

int64_t KvCache::length(int32_t seq) const {
  return static_cast<int64_t>(sequences_[index_of(seq)].tokens.size());
}

std::span<const int32_t> KvCache::cells(int32_t seq) const {
  return sequences_[index_of(seq)].cells;
}

std::span<const TokenId> KvCache::tokens(int32_t seq) const {
  return sequences_[index_of(seq)].tokens;
}

std::span<const int32_t> KvCache::block_table(int32_t seq) const {
  return sequences_[index_of(seq)].blocks;
}

int32_t KvCache::block_refcount(int32_t block) const {
  if (block < 0 || block >= n_blocks()) throw Error("KV cache: block out of range");
  return pool_.refcount(block);
}

std::span<const int32_t> KvCache::append(int32_t seq, std::span<const TokenId> tokens) {
  Sequence& s = sequences_[index_of(seq)];
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t needed = blocks_needed(seq, n);
  if (needed > n_available_blocks()) {
    throw Error(
        strfmt("KV cache full: %lld more positions need %lld new blocks, %lld available "
               "of %lld",
               static_cast<long long>(n), static_cast<long long>(needed),
               static_cast<long long>(n_available_blocks()), static_cast<long long>(n_blocks())));
  }
  if (window_ && !window_->can_append(seq, n)) {
    throw Error(strfmt(
        "KV cache: %lld more positions for sequence %d do not fit the sliding-window layers' "
        "rows (sized for %lld per forward pass)",
        static_cast<long long>(n), seq, static_cast<long long>(window_->n_ubatch())));
  }
  const size_t start = s.cells.size();
  const auto per_block = static_cast<size_t>(block_size());
  for (const TokenId token : tokens) {
    const size_t offset = s.tokens.size() % per_block;
    if (offset == 0) s.blocks.push_back(pool_.take());
    s.cells.push_back(s.blocks.back() * block_size() + static_cast<int32_t>(offset));
    s.tokens.push_back(token);
  }
  if (window_) {
    window_->append(seq, n);
    const auto window_cells = window_->cells(seq);
    for (size_t p = start; p < s.cells.size(); ++p) {
      window_cell_[static_cast<size_t>(s.cells[p])] = window_cells[p];
    }
  }
  return std::span<const int32_t>(s.cells).subspan(start);
}

void KvCache::commit(int32_t seq) {
  Sequence& s = sequences_[index_of(seq)];
  if (window_) {
    // No prefix cache: a reused prefix would lack the released window rows.
    window_->release_unseen(seq);
    return;
  }
  // Nor with recurrent state, which a block's rows do not hold, unless the
  // cache keeps prefix states to resume from.
  if (has_state() && prefix_state_slots_.empty()) return;
  const auto per_block = static_cast<size_t>(block_size());
  const size_t n_full = s.tokens.size() / per_block;
  for (size_t i = s.chain.size(); i < n_full; ++i) {
    const ChainLink parent = i == 0 ? ChainLink{} : s.chain[i - 1];
    const auto block_tokens = std::span<const TokenId>(s.tokens).subspan(i * per_block, per_block);
    ChainLink link{prefix_block_key(parent.key, block_tokens), KvBlockPool::kNoPrefixId};
    // A prefix no registered block names cannot be looked up, so nothing
    // after it can either: registering would only waste the entry.
    if (parent.prefix_id != KvBlockPool::kNoPrefixId) {
      link.prefix_id = pool_.register_block(s.blocks[i], link.key, parent.prefix_id, block_tokens);
    }
    s.chain.push_back(link);
  }
}

int64_t KvCache::attach_prefix(int32_t seq, std::span<const TokenId> tokens) {
  Sequence& s = sequences_[index_of(seq)];
  if (!s.tokens.empty()) {
    throw Error(
        strfmt("KV cache: a prefix attaches only to an empty sequence (%d has %zu positions)", seq,
               s.tokens.size()));
  }
  std::vector<int32_t> chain;
  std::vector<uint64_t> keys;
  walk_cached_prefix(pool_, tokens, [&](int32_t block, uint64_t key, std::span<const TokenId>) {
    chain.push_back(block);
    keys.push_back(key);
  });
  const size_t n = attachable_blocks(chain);
  if (n == 0) return 0;
  const int32_t per_block = block_size();
  for (size_t i = 0; i < n; ++i) {
    const int32_t block = chain[i];
    pool_.retain(block);
    s.blocks.push_back(block);
    s.chain.push_back({keys[i], pool_.prefix_id(block)});
    for (int32_t r = 0; r < per_block; ++r) s.cells.push_back(block * per_block + r);
  }
  const auto length = static_cast<size_t>(n) * static_cast<size_t>(per_block);
  s.tokens.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(length));
  if (has_state()) {
    const int32_t slot = prefix_state_slot(pool_.prefix_id(chain[n - 1]));
    auto& kept = prefix_state_slots_[static_cast<size_t>(slot)];
    kept.last_used = ++prefix_state_clock_;
    kept.rolling_owner = -1;  // another sequence resumed from it: keep it
    std::ranges::copy(prefix_state(static_cast<size_t>(slot)), seq_states(seq).begin());
  }
  return static_cast<int64_t>(length);
}

std::vector<int32_t> KvCache::registered_chain(std::span<const TokenId> tokens) const {
  std::vector<int32_t> chain;
  walk_cached_prefix(pool_, tokens, [&](int32_t block, uint64_t, std::span<const TokenId>) {
    chain.push_back(block);
  });
  return chain;
}

int64_t KvCache::cached_prefix_length(std::span<const TokenId> tokens) const {
  return static_cast<int64_t>(attachable_blocks(registered_chain(tokens))) * block_size();
}

int64_t KvCache::idle_prefix_blocks(std::span<const TokenId> tokens) const {
  const auto chain = registered_chain(tokens);
  const auto attached = std::span(chain).first(attachable_blocks(chain));
  return std::ranges::count_if(attached, [&](int32_t block) { return pool_.refcount(block) == 0; });
}

int64_t KvCache::registered_prefix_length(std::span<const TokenId> tokens) const {
  return walk_cached_prefix(pool_, tokens, [](int32_t, uint64_t, std::span<const TokenId>) {});
}

size_t KvCache::attachable_blocks(std::span<const int32_t> blocks) const {
  if (!has_state()) return blocks.size();
  for (size_t n = blocks.size(); n > 0; --n) {
    if (prefix_state_slot(pool_.prefix_id(blocks[n - 1])) >= 0) return n;
  }
  return 0;
}

int32_t KvCache::prefix_state_slot(uint64_t prefix_id) const {
  if (prefix_id == KvBlockPool::kNoPrefixId) return -1;
  for (size_t i = 0; i < prefix_state_slots_.size(); ++i) {
    const PrefixStateSlot& slot = prefix_state_slots_[i];
    // The id is never reused: a block registered anew has another one.
    if (slot.prefix_id == prefix_id && pool_.prefix_id(slot.block) == prefix_id) {
      return static_cast<int32_t>(i);
    }
  }
  return -1;
}

size_t KvCache::free_prefix_state_slot() {
  size_t oldest = 0;
  for (size_t i = 0; i < prefix_state_slots_.size(); ++i) {
    const PrefixStateSlot& slot = prefix_state_slots_[i];
    const bool stale =
        slot.prefix_id == KvBlockPool::kNoPrefixId || pool_.prefix_id(slot.block) != slot.prefix_id;
    if (stale) return i;
    if (slot.last_used < prefix_state_slots_[oldest].last_used) oldest = i;
  }
  return oldest;
}

std::span<float> KvCache::prefix_state(size_t slot) {
  const auto width = static_cast<size_t>(shape_.state_width());
  return std::span(prefix_state_data_).subspan(slot * width, width);
}

bool KvCache::save_prefix_state(int32_t seq, bool rolling) {
  if (prefix_state_slots_.empty()) return false;
  Sequence& s = sequences_[index_of(seq)];
  const auto per_block = static_cast<size_t>(block_size());
  if (s.tokens.empty() || s.chain.size() * per_block != s.tokens.size()) return false;
  const uint64_t id = s.chain.back().prefix_id;
  if (id == KvBlockPool::kNoPrefixId) return false;
  // The block registered under the id: the sequence's own last block, or
  // the one whose content it repeats (register_block kept that one).
  int32_t block = s.blocks.back();
  if (pool_.prefix_id(block) != id) {
    const size_t last = s.chain.size() - 1;
    const uint64_t parent = last == 0 ? KvBlockPool::kEmptyPrefixId : s.chain[last - 1].prefix_id;
    block = pool_.find(s.chain.back().key, parent,
                       std::span<const TokenId>(s.tokens).subspan(last * per_block, per_block));
    if (block < 0 || pool_.prefix_id(block) != id) return false;
  }
  const auto seq_index = static_cast<int32_t>(index_of(seq));
  if (rolling && s.rolling_prefix_state != id) {
    const int32_t previous = prefix_state_slot(s.rolling_prefix_state);
    if (previous >= 0 &&
        prefix_state_slots_[static_cast<size_t>(previous)].rolling_owner == seq_index) {
      prefix_state_slots_[static_cast<size_t>(previous)] = {};
    }
    s.rolling_prefix_state = KvBlockPool::kNoPrefixId;
  }
  int32_t slot = prefix_state_slot(id);
  if (slot >= 0) {
    // A state already kept for this prefix has the same bits (a row's
    // result does not depend on its batch): nothing to copy, and the slot
    // is no longer one sequence's to give back.
    prefix_state_slots_[static_cast<size_t>(slot)].rolling_owner = -1;
  } else {
    slot = static_cast<int32_t>(free_prefix_state_slot());
    std::ranges::copy(seq_states(seq), prefix_state(static_cast<size_t>(slot)).begin());
    auto& kept = prefix_state_slots_[static_cast<size_t>(slot)];
    kept.prefix_id = id;
    kept.block = block;
    kept.rolling_owner = rolling ? seq_index : -1;
    if (rolling) s.rolling_prefix_state = id;
  }
  prefix_state_slots_[static_cast<size_t>(slot)].last_used = ++prefix_state_clock_;
  return true;
}

int64_t KvCache::n_prefix_states() const {
  return std::ranges::count_if(prefix_state_slots_, [&](const PrefixStateSlot& slot) {
    return slot.prefix_id != KvBlockPool::kNoPrefixId &&
           pool_.prefix_id(slot.block) == slot.prefix_id;
  });
}

bool KvCache::can_truncate(int32_t seq, int64_t length) const {
  const Sequence& s = sequences_[index_of(seq)];
  if (has_state() && length > 0 && length < this->length(seq) && s.checkpoint.length != length &&
      std::ranges::none_of(s.snapshots,
                           [&](const StateSnapshot& snap) { return snap.length == length; })) {
    return false;
  }
  return !window_ || window_->can_truncate(seq, length);
}

int64_t KvCache::nearest_truncation(int32_t seq, int64_t length) const {
  if (can_truncate(seq, length)) return length;
  int64_t best = 0;
  const Sequence& s = sequences_[index_of(seq)];
  for (const StateSnapshot& snap : s.snapshots) {
    if (snap.length <= length && snap.length > best && can_truncate(seq, snap.length)) {
      best = snap.length;
    }
  }
  const int64_t checkpoint = s.checkpoint.length;
  if (checkpoint <= length && checkpoint > best && can_truncate(seq, checkpoint)) best = checkpoint;
  return best;
}

void KvCache::checkpoint_state(int32_t seq) {
  if (!has_state()) return;
  Sequence& s = sequences_[index_of(seq)];
  s.checkpoint.length = length(seq);
  const auto state = seq_states(seq);
  s.checkpoint.state.assign(state.begin(), state.end());
}

void KvCache::drop_checkpoint(int32_t seq) {
  sequences_[index_of(seq)].checkpoint.length = -1;
}

void KvCache::save_state_snapshot(int32_t seq) {
  if (!has_state()) return;
  Sequence& s = sequences_[index_of(seq)];
  const int64_t length = this->length(seq);
  std::erase_if(s.snapshots, [&](const StateSnapshot& snap) { return snap.length == length; });
  if (s.snapshots.size() >= kMaxStateSnapshots) s.snapshots.erase(s.snapshots.begin());
  const auto state = seq_states(seq);
  s.snapshots.push_back({length, std::vector<float>(state.begin(), state.end())});
}

std::vector<int64_t> KvCache::state_snapshot_lengths(int32_t seq) const {
  std::vector<int64_t> lengths;
  for (const StateSnapshot& snap : sequences_[index_of(seq)].snapshots) {
    lengths.push_back(snap.length);
  }
  return lengths;
}

void KvCache::truncate(int32_t seq, int64_t length) {
  const auto kept = std::max<int64_t>(length, 0);
  if (kept >= this->length(seq)) return;
  if (!can_truncate(seq, length) && has_state()) {
    throw Error(strfmt(
        "KV cache: sequence %d cannot be cut back to %lld positions: its recurrent state holds "
        "all %lld (forward the sequence again instead)",
        seq, static_cast<long long>(length), static_cast<long long>(this->length(seq))));
  }
  if (!can_truncate(seq, length)) {
    throw Error(strfmt(
        "KV cache: sequence %d cannot be cut back to %lld positions: its sliding-window layers "
        "keep only the positions from %lld on (forward the sequence again instead)",
        seq, static_cast<long long>(length), static_cast<long long>(window_->first_held(seq))));
  }
  cut(seq, kept);
  if (kept == 0) {
    std::ranges::fill(seq_states(seq), 0.0f);
  } else if (has_state()) {
    // can_truncate found a snapshot or the checkpoint at exactly `kept`.
    const Sequence& s = sequences_[index_of(seq)];
    for (const StateSnapshot& snap : s.snapshots) {
      if (snap.length == kept) std::ranges::copy(snap.state, seq_states(seq).begin());
    }
    if (s.checkpoint.length == kept) {
      std::ranges::copy(s.checkpoint.state, seq_states(seq).begin());
    }
  }
}

std::span<float> KvCache::seq_states(int32_t seq) {
  const auto width = static_cast<size_t>(shape_.state_width());
  return std::span(state_).subspan(index_of(seq) * width, width);
}

std::span<float> KvCache::state(int64_t layer, int32_t seq) {
  const auto il = static_cast<size_t>(layer);
  return seq_states(seq).subspan(state_offsets_[il],
                                 static_cast<size_t>(shape_.layers[il].state_width));
}

void KvCache::drop_appended(int32_t seq, int64_t length) {
  if (length < this->length(seq)) cut(seq, std::max<int64_t>(length, 0));
}

void KvCache::cut(int32_t seq, int64_t length) {
  Sequence& s = sequences_[index_of(seq)];
  const auto kept = static_cast<size_t>(length);
  const auto per_block = static_cast<size_t>(block_size());
  const size_t kept_blocks = (kept + per_block - 1) / per_block;
  const size_t rows_in_cut_block = kept % per_block;  // 0: the cut is on a block boundary
  const int32_t cut_block = rows_in_cut_block ? s.blocks[kept_blocks - 1] : -1;
  // Others read the shared block's rows, and this sequence is about to write
  // after the cut: it gets its own copy.
  const bool copy = cut_block >= 0 && pool_.refcount(cut_block) > 1;
  if (copy && pool_.n_available() == 0 &&
      !frees_a_block(std::span(s.blocks).subspan(kept_blocks))) {
    throw Error(strfmt("KV cache full: no block to copy a shared block into (sequence %d)", seq));
  }
  release_blocks_from(s, kept_blocks);
  // Its rolling prefix state, if any, stays for others as any other.
  s.rolling_prefix_state = KvBlockPool::kNoPrefixId;
  s.tokens.resize(kept);
  s.cells.resize(kept);
  // A snapshot past the cut holds positions the sequence no longer has.
  std::erase_if(s.snapshots, [&](const StateSnapshot& snap) {
    return snap.length > static_cast<int64_t>(kept);
  });
  if (s.checkpoint.length > static_cast<int64_t>(kept)) s.checkpoint.length = -1;
  s.chain.resize(std::min(s.chain.size(), kept / per_block));
  if (copy) {
    replace_last_block_with_copy(s, rows_in_cut_block);
  } else if (cut_block >= 0) {
    // Its tail is about to be overwritten: the registered content is gone.
    pool_.unregister(cut_block);
  }
  if (window_) window_->truncate(seq, length);
}

bool KvCache::frees_a_block(std::span<const int32_t> blocks) const {
  return std::any_of(blocks.begin(), blocks.end(),
                     [&](int32_t b) { return pool_.refcount(b) == 1; });
}

void KvCache::replace_last_block_with_copy(Sequence& s, size_t n_rows) {
  const int32_t shared_block = s.blocks.back();
  const int32_t own_block = pool_.take();
  copy_block_rows(shared_block, own_block, static_cast<int64_t>(n_rows));
  pool_.release(shared_block);
  s.blocks.back() = own_block;
  const size_t first = s.cells.size() - n_rows;
  for (size_t i = 0; i < n_rows; ++i) {
    s.cells[first + i] = own_block * block_size() + static_cast<int32_t>(i);
  }
}

void KvCache::release_blocks_from(Sequence& s, size_t first_block) {
  // Last block first: a prefix's later blocks become the older cached ones,
  // so eviction takes them before the blocks their lookup goes through.
  for (size_t i = s.blocks.size(); i-- > first_block;) pool_.release(s.blocks[i]);
  s.blocks.resize(std::min(s.blocks.size(), first_block));
}

void KvCache::copy_block_rows(int32_t from_block, int32_t to_block, int64_t n_rows) {
  const int32_t from_cell = from_block * block_size();
  const int32_t to_cell = to_block * block_size();
  for (int64_t layer = 0; layer < shape_.n_layer(); ++layer) {
    const LayerStorage& storage = storage_[static_cast<size_t>(layer)];
    if (storage.in_window_rows) continue;  // never shared: no prefix cache with them
    const auto n = static_cast<size_t>(n_rows);
    for (const KvSide side : {KvSide::keys, KvSide::values}) {
      const size_t row_bytes = side == KvSide::keys ? storage.k_row_bytes : storage.v_row_bytes;
      rows_of(storage).copy(side, row_offset(side, layer, from_cell),
                            row_offset(side, layer, to_cell), n * row_bytes);
    }
  }
}

void KvCache::clear_all() {
  for (auto& s : sequences_) {
    s.tokens.clear();
    s.cells.clear();
    s.blocks.clear();
    s.chain.clear();
    s.snapshots.clear();
    s.rolling_prefix_state = KvBlockPool::kNoPrefixId;
  }
  std::ranges::fill(prefix_state_slots_, PrefixStateSlot{});
  pool_.reset();
  if (window_) window_->clear_all();
  std::ranges::fill(state_, 0.0f);
}

size_t KvCache::row_offset(KvSide side, int64_t layer, int32_t cell) const {
  const LayerStorage& storage = storage_[static_cast<size_t>(layer)];
  const auto index = static_cast<size_t>(layer_cell(storage, cell));
  return side == KvSide::keys ? storage.k_offset + index * storage.k_row_bytes
                              : storage.v_offset + index * storage.v_row_bytes;
}

void KvCache::store(KvSide side, int64_t layer, int32_t cell, std::span<const float> row) {
  const KvLayerShape& shape = shape_.layers[static_cast<size_t>(layer)];
  const int64_t width = side == KvSide::keys ? shape.k_width : shape.v_width;
  if (static_cast<int64_t>(row.size()) != width) throw Error("KV cache: row width mismatch");
  rows_of(storage_[static_cast<size_t>(layer)])
      .store_row(side, row_offset(side, layer, cell), row, shape_.type);
}

void KvCache::store_k(int64_t layer, int32_t cell, std::span<const float> row) {
  store(KvSide::keys, layer, cell, row);
}

void KvCache::store_v(int64_t layer, int32_t cell, std::span<const float> row) {
  store(KvSide::values, layer, cell, row);
}

std::span<const int32_t> KvCache::layer_cells(const LayerStorage& storage, int32_t seq) const {
  if (storage.in_window_rows) return window_->cells(static_cast<int32_t>(index_of(seq)));
  return sequences_[index_of(seq)].cells;
}

kernels::KvRowsView KvCache::rows_view(KvSide side, int64_t layer, int32_t seq) const {
  const LayerStorage& storage = storage_[static_cast<size_t>(layer)];
  const std::byte* bytes = rows_of(storage).host_bytes(side);
  if (bytes == nullptr) {
    throw Error(strfmt("KV cache: layer %lld's rows live on a device, not in host memory",
                       static_cast<long long>(layer)));
  }
  const bool keys = side == KvSide::keys;
  return {bytes + (keys ? storage.k_offset : storage.v_offset),
          keys ? storage.k_row_bytes : storage.v_row_bytes, shape_.type == KvType::f16,
          layer_cells(storage, seq)};
}

kernels::KvRowsView KvCache::keys(int64_t layer, int32_t seq) const {
  return rows_view(KvSide::keys, layer, seq);
}

kernels::KvRowsView KvCache::values(int64_t layer, int32_t seq) const {
  if (shape_.layers[static_cast<size_t>(layer)].values_in_keys) return keys(layer, seq);
  return rows_view(KvSide::values, layer, seq);
}

}  // namespace cortiq
