// The key/value cache, paged: per layer, one row of keys and one row of
// values per cell, in f32 or f16, the cells grouped in fixed-size blocks
// (block b owns cells [b*B, b*B+B)) that all sequences draw from. Each
// sequence has a block table (its blocks in position order), the cell of
// every position (materialized, so attention reads rows through a plain cell
// list) and its tokens.
//
// Prefix cache: commit() registers a sequence's full blocks under a hash
// chain of their tokens; attach_prefix() gives a new sequence the registered
// blocks its tokens start with, shared (reference counted) instead of
// recomputed. A block no sequence holds stays cached with its content until
// an allocation needs it (least recently released first). Shared blocks are
// always full, so appends never write into them; cutting a sequence back
// into a shared block copies that block first.
//
// Every token enters the cache exactly once: the forward pass appends the
// rows of a batch (append), writes their keys and values layer by layer,
// attention reads positions [0, pos] of the row's sequence, and the pass
// commits the sequences once the batch succeeded.
//
// Recurrent state: a block's rows do not hold it, so a model with state
// shares a prefix only where the cache kept a snapshot of the state at the
// end of it (save_prefix_state, at a block boundary, under the prefix id of
// the block that ends there): attach_prefix attaches the longest chain of
// registered blocks that ends in such a snapshot and starts the sequence's
// state from it. The snapshots live in n_prefix_states slots, reused least
// recently used first.
//
// Sliding-window layers: given n_ubatch, the rows of layers that attend to a
// window keep only what the window still sees (KvWindowRows), so their
// memory is bounded by the window, not the context. The prefix cache then
// stays off (a reused prefix would lack those rows), and a cut below what
// they still hold is refused (can_truncate): the caller forwards again.
//
// Not thread-safe: one owner thread drives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "cortiq/types.hpp"
#include "kernels/cpu/attention.hpp"
#include "kv/kv_block_pool.hpp"
#include "kv/kv_row_storage.hpp"
#include "kv/kv_window_rows.hpp"

namespace cortiq {

// One layer's rows: n_head_kv * head_dim_k keys and n_head_kv * head_dim_v
// values per position (layers may differ), and the layer's sliding window
// (a row at position p sees [p - window + 1, p]; 0 = every position).
struct KvLayerShape {
  int64_t k_width = 0;
  int64_t v_width = 0;
  int64_t window = 0;
  // No value rows (v_width 0): values() reads the key rows, whose first
  // floats are the values (absorbed latent attention caches one latent).
  bool values_in_keys = false;
  // Floats of recurrent state per sequence (LayerSpec::state_width); 0: none.
  int64_t state_width = 0;
};

// Built by DecoderModel::kv_cache_shape from the model's layers.
struct KvCacheShape {
  std::vector<KvLayerShape> layers;
  // Total positions over all sequences; the cache holds
  // ceil(n_cells / block_size) blocks, so up to a block's worth more.
  int64_t n_cells = 0;
  int32_t n_seq = 1;  // sequences that can live in the cache at once
  KvType type = KvType::f16;
  int32_t block_size = 16;  // positions per block
  // The most positions one forward pass appends to a sequence (the prefill
  // chunk). Given, sliding-window layers keep window - 1 + n_ubatch
  // positions per sequence (in whole blocks) instead of n_cells; 0 keeps
  // them whole.
  int64_t n_ubatch = 0;
  // Snapshots of one sequence's recurrent state (state_width() floats each)
  // the prefix cache keeps; 0: a model with state shares no prefix.
  int32_t n_prefix_states = 0;

  int64_t n_layer() const { return static_cast<int64_t>(layers.size()); }
  // Floats of recurrent state per sequence, all layers together.
  int64_t state_width() const;
  // The window that bounds the window layers' rows: the widest layer
  // window, or 0 when every layer is kept whole (no n_ubatch, no window
  // layer, or a window too wide to save anything).
  int64_t bounded_window() const;
  bool is_bounded(int64_t layer) const {
    return bounded_window() > 0 && layers[static_cast<size_t>(layer)].window > 0;
  }

  // Every layer alike (tests, tools).
  static KvCacheShape uniform(int64_t n_layer, int64_t k_width, int64_t v_width, int64_t n_cells,
                              int32_t n_seq = 1, KvType type = KvType::f16,
                              int32_t block_size = 16);
};

class KvCache {
 public:
  // Allocates every block's rows up front, in the storage `make_rows` gives
  // (host memory by default; a device backend's own); throws cortiq::Error
  // when the shape is invalid or the memory is not there.
  explicit KvCache(const KvCacheShape& shape,
                   const KvRowStorage::Factory& make_rows = HostKvRows::make);
  // The same with each part's layers in its own storage (the first part
  // starts at layer 0, the others in increasing order).
  KvCache(const KvCacheShape& shape, std::span<const KvRowsPart> parts);

  // Bytes the cache of this shape takes (whole blocks).
  static uint64_t bytes_needed(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }

  // Block accounting: every block is used (held by a sequence), cached (held
  // by none, kept for its registered content) or free.
  int32_t block_size() const { return pool_.block_size(); }
  int64_t n_blocks() const { return pool_.n_blocks(); }
  int64_t n_used_blocks() const { return pool_.n_used(); }
  int64_t n_cached_blocks() const { return pool_.n_cached(); }
  int64_t n_free_blocks() const { return pool_.n_free(); }
  // What appends may take: the free blocks, then the cached ones.
  int64_t n_available_blocks() const { return pool_.n_available(); }
  // New blocks appending n tokens to the sequence takes, after the room
  // left in its last block.
  int64_t blocks_needed(int32_t seq, int64_t n) const;
  // The most positions one pass may append to a sequence (0: no limit):
  // n_ubatch when window layers are bounded.
  int64_t max_append() const { return window_ ? window_->n_ubatch() : 0; }

  int64_t length(int32_t seq) const;
  // The cell of every position of the sequence, in position order.
  std::span<const int32_t> cells(int32_t seq) const;
  // The token of every position of the sequence.
  std::span<const TokenId> tokens(int32_t seq) const;
  // The sequence's blocks in position order.
  std::span<const int32_t> block_table(int32_t seq) const;
  // How many sequences hold the block.
  int32_t block_refcount(int32_t block) const;

  // Gives the sequence one position per token (length .. length+n-1) and
  // returns their cells. Throws cortiq::Error, changing nothing, when fewer
  // blocks than blocks_needed() are available.
  std::span<const int32_t> append(int32_t seq, std::span<const TokenId> tokens);
  // Registers the sequence's full blocks in the prefix cache. Call only
  // once their keys and values are written.
  void commit(int32_t seq);
  // Starts an empty sequence with the longest chain of registered blocks
  // that `tokens` begins with, and returns the positions attached (whole
  // blocks, at most tokens.size()). With recurrent state, the chain ends at
  // its last block with a prefix state, which becomes the sequence's state.
  // Throws when the sequence is not empty.
  int64_t attach_prefix(int32_t seq, std::span<const TokenId> tokens);
  // What attach_prefix would attach, changing nothing.
  int64_t cached_prefix_length(std::span<const TokenId> tokens) const;
  // The positions of the longest chain of registered blocks `tokens` begins
  // with, prefix states or not (without state: cached_prefix_length).
  int64_t registered_prefix_length(std::span<const TokenId> tokens) const;
  // Of the blocks attach_prefix would attach, those no sequence holds now:
  // attaching takes them from the available ones.
  int64_t idle_prefix_blocks(std::span<const TokenId> tokens) const;
  // Whether attach_prefix can ever attach anything: no bounded window rows,
  // and prefix states to resume from where the layers keep state.
  bool shares_prefixes() const {
    return !window_ && (!has_state() || !prefix_state_slots_.empty());
  }
  // Whether truncate(seq, length) can keep every row the positions after
  // the cut will see: false when bounded window layers released them, and
  // with recurrent state for any cut but to 0 or to a length with a state
  // snapshot (the state holds every position; the caller forwards the
  // sequence again instead).
  bool can_truncate(int32_t seq, int64_t length) const;
  // The longest cut at or below `length` that can_truncate allows: length
  // itself, a snapshot's length, or 0.
  int64_t nearest_truncation(int32_t seq, int64_t length) const;
  // Cuts the sequence back to its first `length` positions (to 0: its
  // recurrent state zeroed; to a snapshot's length: its state restored from
  // it). A cut inside a shared block copies that block, and throws
  // cortiq::Error, changing nothing, when no block is available for the
  // copy or when !can_truncate(seq, length).
  void truncate(int32_t seq, int64_t length);
  // Keeps a copy of the sequence's recurrent state at its current length
  // (no-op without state), so that a later truncate() back to that length
  // restores it instead of forwarding again: the end of a turn's prompt,
  // where the next turn's prompt usually departs from this one's history.
  // A sequence keeps its kMaxStateSnapshots latest; a cut below a snapshot
  // drops it.
  void save_state_snapshot(int32_t seq);
  static constexpr size_t kMaxStateSnapshots = 4;
  // Speculative decoding's checkpoint: like a snapshot (truncate() back to
  // its length restores the state), but one per sequence, kept apart from
  // the snapshots (it evicts none of them) and reusing its memory, until
  // the next checkpoint_state(), drop_checkpoint() or a cut below it.
  // No-op without state.
  void checkpoint_state(int32_t seq);
  void drop_checkpoint(int32_t seq);
  // Keeps the sequence's recurrent state as the prefix state of its last
  // block, for attach_prefix: call after commit(), at a length that is a
  // whole number of blocks. `rolling`: the sequence's previous rolling
  // prefix state gives its slot back first (a generation that saves one
  // per block keeps only its latest). Returns false, keeping nothing,
  // without state, without prefix-state slots, or when the length is not
  // the end of a registered block.
  bool save_prefix_state(int32_t seq, bool rolling = false);
  // Prefix states kept now (at most shape().n_prefix_states).
  int64_t n_prefix_states() const;
  // The sequence's snapshot lengths, oldest first.
  std::vector<int64_t> state_snapshot_lengths(int32_t seq) const;
  void clear(int32_t seq) { truncate(seq, 0); }
  // Whether the layers keep recurrent state (KvLayerShape::state_width).
  bool has_state() const { return !state_.empty(); }
  // A sequence's recurrent state in one layer (state_width floats; empty
  // for a layer without), zero for an empty sequence.
  std::span<float> state(int64_t layer, int32_t seq);
  // A forward pass's rollback before its layers ran: the positions append()
  // gave after `length` go, the state (which they never advanced) stays.
  void drop_appended(int32_t seq, int64_t length);
  // Every sequence empty, every block free, the prefix cache forgotten.
  void clear_all();

  // Stores one row of keys / values (the layer's k_width / v_width floats)
  // at the position append() gave `cell`.
  void store_k(int64_t layer, int32_t cell, std::span<const float> row);
  void store_v(int64_t layer, int32_t cell, std::span<const float> row);

  // The cached rows of a sequence in one layer, for attention on the host
  // (values(): the key rows in a values_in_keys layer). Throws
  // cortiq::Error when the rows live on a device.
  kernels::KvRowsView keys(int64_t layer, int32_t seq) const;
  kernels::KvRowsView values(int64_t layer, int32_t seq) const;

  // For a backend whose storage holds the rows: the layer's storage, the
  // byte offset of the layer's row for the position append() gave `cell`
  // in it, and the layer's cell of every position of the sequence (its
  // page table).
  const KvRowStorage& row_storage(int64_t layer) const {
    return *parts_[storage_[static_cast<size_t>(layer)].part];
  }
  size_t row_offset(KvSide side, int64_t layer, int32_t cell) const;
  std::span<const int32_t> layer_cells(int64_t layer, int32_t seq) const {
    return layer_cells(storage_[static_cast<size_t>(layer)], seq);
  }

 private:
  // A committed full block of a sequence: its key, and the prefix id of a
  // registered block with the same prefix (kNoPrefixId when none has it).
  struct ChainLink {
    uint64_t key = kEmptyPrefixKey;
    uint64_t prefix_id = KvBlockPool::kEmptyPrefixId;
  };

  // A sequence's recurrent state (every layer's) at an earlier length.
  struct StateSnapshot {
    int64_t length = 0;
    std::vector<float> state;
  };

  struct Sequence {
    std::vector<TokenId> tokens;
    std::vector<int32_t> cells;
    std::vector<int32_t> blocks;
    std::vector<ChainLink> chain;          // the first chain.size() blocks are committed
    std::vector<StateSnapshot> snapshots;  // oldest first, lengths distinct
    StateSnapshot checkpoint;              // length < 0: none
    Sequence() { checkpoint.length = -1; }
    // The prefix id of the sequence's latest rolling prefix state.
    uint64_t rolling_prefix_state = KvBlockPool::kNoPrefixId;
  };

  // A slot of prefix_state_data_: the state after the prefix `prefix_id`
  // names, registered on `block` (stale once the block's id differs).
  struct PrefixStateSlot {
    uint64_t prefix_id = KvBlockPool::kNoPrefixId;
    int32_t block = -1;
    uint64_t last_used = 0;
    // The sequence whose rolling state it is, free to give the slot back;
    // -1 once anything else saved or attached it.
    int32_t rolling_owner = -1;
  };

  // The index of a sequence; throws cortiq::Error when it is out of range.
  size_t index_of(int32_t seq) const;
  // The slot holding the prefix state after `prefix_id`, or -1.
  int32_t prefix_state_slot(uint64_t prefix_id) const;
  // A slot for a new prefix state: an empty or stale one, else the least
  // recently used.
  size_t free_prefix_state_slot();
  std::span<float> prefix_state(size_t slot);
  // How many of `blocks` (a chain from the first block) attach_prefix
  // takes: all without state, else up to the last with a prefix state.
  size_t attachable_blocks(std::span<const int32_t> blocks) const;
  // The registered blocks `tokens` begins with, in order.
  std::vector<int32_t> registered_chain(std::span<const TokenId> tokens) const;
  // truncate() without the recurrent state's check.
  void cut(int32_t seq, int64_t length);
  std::span<float> seq_states(int32_t seq);
  // Releases the sequence's blocks from first_block on, last first.
  void release_blocks_from(Sequence& s, size_t first_block);
  // Whether releasing these blocks would make one available.
  bool frees_a_block(std::span<const int32_t> blocks) const;
  // Gives the sequence a private copy of the first n_rows rows of its
  // (shared) last block.
  void replace_last_block_with_copy(Sequence& s, size_t n_rows);
  void copy_block_rows(int32_t from_block, int32_t to_block, int64_t n_rows);
  size_t element_bytes() const { return shape_.type == KvType::f16 ? 2 : 4; }
  // Byte offsets of each layer's rows in the storage's sides, and whether
  // they live in the window rows' cells.
  struct LayerStorage {
    size_t part = 0;  // which of parts_ holds the rows
    size_t k_offset = 0, v_offset = 0;
    size_t k_row_bytes = 0, v_row_bytes = 0;
    bool in_window_rows = false;
  };
  // The cell of the layer's rows for the position append() gave `cell`.
  int32_t layer_cell(const LayerStorage& storage, int32_t cell) const {
    return storage.in_window_rows ? window_cell_[static_cast<size_t>(cell)] : cell;
  }
  // The cell of each position of the sequence in the layer's rows.
  std::span<const int32_t> layer_cells(const LayerStorage& storage, int32_t seq) const;
  void store(KvSide side, int64_t layer, int32_t cell, std::span<const float> row);
  kernels::KvRowsView rows_view(KvSide side, int64_t layer, int32_t seq) const;

  KvCacheShape shape_;
  KvBlockPool pool_;
  std::vector<LayerStorage> storage_;
  // Per part: [side][the part's layers][cell][the layer's width].
  std::vector<std::unique_ptr<KvRowStorage>> parts_;
  KvRowStorage& rows_of(const LayerStorage& storage) const { return *parts_[storage.part]; }
  std::vector<Sequence> sequences_;
  // The bounded window layers' cells, and for each cell append() gives (the
  // full layers' cell of a position) the window rows' cell of that position.
  std::optional<KvWindowRows> window_;
  std::vector<int32_t> window_cell_;
  // Recurrent state: [seq][layer's state_offsets_ .. + state_width].
  std::vector<float> state_;
  std::vector<size_t> state_offsets_;
  // Prefix states: [slot][state_width()].
  std::vector<PrefixStateSlot> prefix_state_slots_;
  std::vector<float> prefix_state_data_;
  uint64_t prefix_state_clock_ = 0;
};

}  // namespace cortiq
