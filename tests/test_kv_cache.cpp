// The paged KV cache: block tables, reference counts, the prefix cache (its
// LRU eviction, its lookups that never trust a hash alone, copy-on-write),
// checked against a plain model of each sequence's tokens, and end to end:
// a prefix attached from the cache gives the same logits, bit for bit, as
// the prefix forwarded again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "kv/batch.hpp"
#include "kv/kv_block_pool.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/forward_buffers.hpp"

namespace cortiq {
namespace {

constexpr int64_t kLayers = 2;
constexpr int64_t kKeyWidth = 3;
constexpr int64_t kValueWidth = 2;

KvCacheShape small_shape(int64_t n_cells, int32_t n_seq, int32_t block_size) {
  return KvCacheShape::uniform(kLayers, kKeyWidth, kValueWidth, n_cells, n_seq, KvType::f32,
                               block_size);
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What the test writes at each position: a function of the tokens up to and
// including it (never of the sequence), as a model's keys and values are, so
// a shared block holds what every sequence sharing it would have written.
// Values below 2^24 are exact in f32.
struct PositionRows {
  std::vector<float> k = std::vector<float>(kKeyWidth);
  std::vector<float> v = std::vector<float>(kValueWidth);
};

PositionRows rows_for(uint64_t prefix_hash, int64_t layer) {
  PositionRows rows;
  for (size_t j = 0; j < rows.k.size(); ++j) {
    rows.k[j] = static_cast<float>(mix(prefix_hash + static_cast<uint64_t>(layer * 16 + j)) >> 40);
  }
  for (size_t j = 0; j < rows.v.size(); ++j) {
    rows.v[j] =
        -static_cast<float>(mix(prefix_hash ^ static_cast<uint64_t>(layer * 16 + j + 8)) >> 40);
  }
  return rows;
}

// The hash of every prefix of `tokens`: entry p covers tokens [0, p].
std::vector<uint64_t> prefix_hashes(std::span<const TokenId> tokens) {
  std::vector<uint64_t> hashes;
  uint64_t h = 0;
  for (const TokenId t : tokens) {
    h = mix(h ^ static_cast<uint64_t>(t + 1));
    hashes.push_back(h);
  }
  return hashes;
}

// Writes the rows of the sequence's positions from `first` on.
void write_rows(KvCache& cache, int32_t seq, size_t first) {
  const auto hashes = prefix_hashes(cache.tokens(seq));
  const auto cells = cache.cells(seq);
  for (size_t p = first; p < cells.size(); ++p) {
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      const auto rows = rows_for(hashes[p], layer);
      cache.store_k(layer, cells[p], rows.k);
      cache.store_v(layer, cells[p], rows.v);
    }
  }
}

std::vector<TokenId> append_and_write(KvCache& cache, int32_t seq,
                                      std::span<const TokenId> tokens) {
  const auto before = static_cast<size_t>(cache.length(seq));
  cache.append(seq, tokens);
  write_rows(cache, seq, before);
  return {tokens.begin(), tokens.end()};
}

std::vector<float> read_row(const kernels::KvRowsView& view, size_t position, size_t width) {
  std::vector<float> row(width);
  std::memcpy(row.data(), view.base + static_cast<size_t>(view.cells[position]) * view.row_bytes,
              width * sizeof(float));
  return row;
}

// Every position of the sequence reads back the rows its prefix implies.
void expect_rows(const KvCache& cache, int32_t seq) {
  const auto hashes = prefix_hashes(cache.tokens(seq));
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    const auto keys = cache.keys(layer, seq);
    const auto values = cache.values(layer, seq);
    ASSERT_EQ(keys.cells.size(), hashes.size());
    ASSERT_EQ(values.cells.size(), hashes.size());
    for (size_t p = 0; p < hashes.size(); ++p) {
      const auto expected = rows_for(hashes[p], layer);
      ASSERT_EQ(read_row(keys, p, kKeyWidth), expected.k) << "seq " << seq << " pos " << p;
      ASSERT_EQ(read_row(values, p, kValueWidth), expected.v) << "seq " << seq << " pos " << p;
    }
  }
}

// The cache agrees with the expected tokens of every sequence, its block
// accounting adds up, and blocks are shared only when full.
void expect_consistent(const KvCache& cache, const std::vector<std::vector<TokenId>>& expected) {
  const int64_t block = cache.block_size();
  std::vector<int32_t> holders(static_cast<size_t>(cache.n_blocks()));
  for (int32_t seq = 0; seq < static_cast<int32_t>(expected.size()); ++seq) {
    const auto tokens = cache.tokens(seq);
    ASSERT_TRUE(std::ranges::equal(tokens, expected[static_cast<size_t>(seq)])) << "seq " << seq;
    const auto length = cache.length(seq);
    const auto cells = cache.cells(seq);
    const auto table = cache.block_table(seq);
    ASSERT_EQ(static_cast<int64_t>(cells.size()), length);
    ASSERT_EQ(static_cast<int64_t>(table.size()), (length + block - 1) / block);
    for (int64_t p = 0; p < length; ++p) {
      ASSERT_EQ(cells[static_cast<size_t>(p)],
                table[static_cast<size_t>(p / block)] * block + p % block);
    }
    const std::set<int32_t> distinct(table.begin(), table.end());
    ASSERT_EQ(distinct.size(), table.size()) << "a block twice in sequence " << seq;
    for (const int32_t b : table) ++holders[static_cast<size_t>(b)];
    expect_rows(cache, seq);
  }
  int64_t used = 0;
  for (int32_t b = 0; b < cache.n_blocks(); ++b) {
    ASSERT_EQ(cache.block_refcount(b), holders[static_cast<size_t>(b)]) << "block " << b;
    used += holders[static_cast<size_t>(b)] > 0 ? 1 : 0;
  }
  EXPECT_EQ(cache.n_used_blocks(), used);
  EXPECT_EQ(cache.n_used_blocks() + cache.n_cached_blocks() + cache.n_free_blocks(),
            cache.n_blocks());
  EXPECT_EQ(cache.n_available_blocks(), cache.n_cached_blocks() + cache.n_free_blocks());
  // Cells derive from the tables, so two sequences share a cell only through
  // a shared block, and a shared block is full in every sequence holding it.
  for (int32_t seq = 0; seq < static_cast<int32_t>(expected.size()); ++seq) {
    const auto table = cache.block_table(seq);
    for (size_t i = 0; i < table.size(); ++i) {
      if (holders[static_cast<size_t>(table[i])] > 1) {
        ASSERT_GE(cache.length(seq), static_cast<int64_t>(i + 1) * block) << "seq " << seq;
      }
    }
  }
}

// Everything an operation refused must leave as it was.
struct Snapshot {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::vector<int32_t>> cells, tables;
  int64_t used = 0, cached = 0, free = 0;

  explicit Snapshot(const KvCache& cache)
      : used(cache.n_used_blocks()), cached(cache.n_cached_blocks()), free(cache.n_free_blocks()) {
    for (int32_t seq = 0; seq < cache.shape().n_seq; ++seq) {
      tokens.emplace_back(cache.tokens(seq).begin(), cache.tokens(seq).end());
      cells.emplace_back(cache.cells(seq).begin(), cache.cells(seq).end());
      tables.emplace_back(cache.block_table(seq).begin(), cache.block_table(seq).end());
    }
  }
  bool operator==(const Snapshot&) const = default;
};

// Would truncating copy a shared block with none to copy into?
bool truncate_must_refuse(const KvCache& cache, int32_t seq, int64_t length) {
  const int64_t block = cache.block_size();
  if (length >= cache.length(seq) || length % block == 0) return false;
  const auto table = cache.block_table(seq);
  const auto kept_blocks = static_cast<size_t>((length + block - 1) / block);
  if (cache.block_refcount(table[kept_blocks - 1]) == 1 || cache.n_available_blocks() > 0) {
    return false;
  }
  return std::none_of(table.begin() + static_cast<std::ptrdiff_t>(kept_blocks), table.end(),
                      [&](int32_t b) { return cache.block_refcount(b) == 1; });
}

TEST(KvCachePaged, RandomOperationsKeepEverySequenceConsistent) {
  constexpr int32_t kSeqs = 4;
  constexpr int32_t kBlock = 4;
  KvCache cache(small_shape(46, kSeqs, kBlock));  // rounds up to 12 blocks
  ASSERT_EQ(cache.n_blocks(), 12);
  std::mt19937 rng(20240611);
  const auto below = [&](uint32_t n) { return static_cast<int64_t>(rng() % n); };

  // Prompts the sequences mostly follow, so prefixes repeat: the last two
  // share their first 8 tokens with the first.
  std::vector<std::vector<TokenId>> prompts(3, std::vector<TokenId>(24));
  for (auto& prompt : prompts) {
    for (auto& t : prompt) t = static_cast<TokenId>(below(4));
  }
  std::copy_n(prompts[0].begin(), 8, prompts[1].begin());
  std::copy_n(prompts[0].begin(), 8, prompts[2].begin());

  std::vector<std::vector<TokenId>> expected(kSeqs);
  std::vector<size_t> follows(kSeqs, 0);
  int attach_hits = 0, refused_appends = 0, shared_cuts = 0;
  for (int step = 0; step < 6000; ++step) {
    const auto seq = static_cast<int32_t>(below(kSeqs));
    auto& seq_tokens = expected[static_cast<size_t>(seq)];
    const int64_t op = below(100);
    if (op < 45) {
      std::vector<TokenId> tokens(static_cast<size_t>(1 + below(6)));
      const auto& prompt = prompts[follows[static_cast<size_t>(seq)]];
      for (size_t i = 0; i < tokens.size(); ++i) {
        const size_t at = seq_tokens.size() + i;
        tokens[i] =
            at < prompt.size() && below(8) != 0 ? prompt[at] : static_cast<TokenId>(below(4));
      }
      if (cache.blocks_needed(seq, static_cast<int64_t>(tokens.size())) >
          cache.n_available_blocks()) {
        const Snapshot before(cache);
        EXPECT_THROW(cache.append(seq, tokens), Error);
        EXPECT_TRUE(Snapshot(cache) == before) << "a refused append changed the cache";
        ++refused_appends;
      } else {
        append_and_write(cache, seq, tokens);
        seq_tokens.insert(seq_tokens.end(), tokens.begin(), tokens.end());
        if (below(2) == 0) cache.commit(seq);
      }
    } else if (op < 60) {
      cache.commit(seq);
    } else if (op < 75) {
      const int64_t length = below(static_cast<uint32_t>(seq_tokens.size() + 1));
      if (truncate_must_refuse(cache, seq, length)) {
        const Snapshot before(cache);
        EXPECT_THROW(cache.truncate(seq, length), Error);
        EXPECT_TRUE(Snapshot(cache) == before) << "a refused truncate changed the cache";
      } else {
        const auto table = cache.block_table(seq);
        if (length % kBlock != 0 && length < cache.length(seq) &&
            cache.block_refcount(table[static_cast<size_t>(length / kBlock)]) > 1) {
          ++shared_cuts;
        }
        cache.truncate(seq, length);
        seq_tokens.resize(static_cast<size_t>(length));
      }
    } else if (op < 85) {
      cache.clear(seq);
      seq_tokens.clear();
    } else {
      if (!seq_tokens.empty()) {
        EXPECT_THROW(cache.attach_prefix(seq, seq_tokens), Error);
        cache.clear(seq);
        seq_tokens.clear();
      }
      follows[static_cast<size_t>(seq)] = static_cast<size_t>(below(3));
      const auto prompt = std::span<const TokenId>(prompts[follows[static_cast<size_t>(seq)]])
                              .first(static_cast<size_t>(below(25)));
      const int64_t cached = cache.cached_prefix_length(prompt);
      const int64_t attached = cache.attach_prefix(seq, prompt);
      EXPECT_EQ(attached, cached);
      EXPECT_EQ(attached % kBlock, 0);
      seq_tokens.assign(prompt.begin(), prompt.begin() + attached);
      attach_hits += attached > 0 ? 1 : 0;
    }
    expect_consistent(cache, expected);
    if (HasFailure())
      FAIL() << "after step " << step << " (operation " << op << ", seq " << seq << ")";
  }
  // The run went through every interesting path.
  EXPECT_GT(attach_hits, 50);
  EXPECT_GT(refused_appends, 10);
  EXPECT_GT(shared_cuts, 10);
  cache.clear_all();
  EXPECT_EQ(cache.n_free_blocks(), cache.n_blocks());
  EXPECT_EQ(cache.cached_prefix_length(prompts[0]), 0);
}

std::vector<TokenId> token_run(TokenId first, size_t n) {
  std::vector<TokenId> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = first + static_cast<TokenId>(i);
  return tokens;
}

TEST(KvCachePrefix, EvictsTheLeastRecentlyReleasedBlocksFirst) {
  KvCache cache(small_shape(16, 3, 4));  // 4 blocks
  const auto a = token_run(100, 8);
  const auto b = token_run(200, 8);
  append_and_write(cache, 0, a);
  cache.commit(0);
  cache.clear(0);  // A's 2 blocks cached
  append_and_write(cache, 1, b);
  cache.commit(1);
  cache.clear(1);  // then B's
  EXPECT_EQ(cache.n_cached_blocks(), 4);
  EXPECT_EQ(cache.n_free_blocks(), 0);
  EXPECT_EQ(cache.cached_prefix_length(a), 8);
  EXPECT_EQ(cache.cached_prefix_length(b), 8);

  append_and_write(cache, 2, token_run(300, 8));  // takes two cached blocks: A's
  EXPECT_EQ(cache.n_cached_blocks(), 2);
  EXPECT_EQ(cache.cached_prefix_length(a), 0);
  ASSERT_EQ(cache.attach_prefix(0, b), 8);
  EXPECT_EQ(cache.attach_prefix(1, a), 0);
  EXPECT_EQ(cache.n_used_blocks(), 4);
  expect_consistent(cache, {b, {}, token_run(300, 8)});
}

TEST(KvCachePrefix, EvictionTakesAPrefixsLaterBlocksFirst) {
  KvCache cache(small_shape(12, 2, 4));  // 3 blocks
  const auto a = token_run(100, 12);
  append_and_write(cache, 0, a);
  cache.commit(0);
  cache.clear(0);
  append_and_write(cache, 1, token_run(500, 4));  // one block: A's last
  EXPECT_EQ(cache.cached_prefix_length(a), 8);
}

TEST(KvCachePrefix, DifferentTokensNeverAttach) {
  KvCache cache(small_shape(32, 2, 4));
  const auto a = token_run(100, 12);
  append_and_write(cache, 0, a);
  cache.commit(0);
  // Same length, other tokens: nothing. Same first block, then others: one block.
  EXPECT_EQ(cache.attach_prefix(1, token_run(101, 12)), 0);
  auto diverging = a;
  diverging[5] = 7;
  EXPECT_EQ(cache.cached_prefix_length(diverging), 4);
  // Only whole blocks attach, and never more than the tokens given.
  EXPECT_EQ(cache.cached_prefix_length(std::span(a).first(11)), 8);
  EXPECT_EQ(cache.cached_prefix_length(std::span(a).first(3)), 0);
  // The same block tokens after a different prefix are another prefix.
  const auto shifted = token_run(104, 4);  // a's second block, at position 0
  EXPECT_EQ(cache.cached_prefix_length(shifted), 0);
}

TEST(KvCachePrefix, UncommittedBlocksAreNotCached) {
  KvCache cache(small_shape(32, 2, 4));
  const auto a = token_run(100, 8);
  append_and_write(cache, 0, a);
  EXPECT_EQ(cache.cached_prefix_length(a), 0);
  cache.commit(0);
  EXPECT_EQ(cache.cached_prefix_length(a), 8);
  cache.truncate(0, 6);  // the second block's tail will be rewritten: unregistered
  EXPECT_EQ(cache.cached_prefix_length(a), 4);
  cache.clear(0);
  EXPECT_EQ(cache.n_cached_blocks(), 1);
  EXPECT_EQ(cache.n_free_blocks(), 7);
}

TEST(KvCachePrefix, DuplicateContentStaysPrivate) {
  KvCache cache(small_shape(32, 2, 4));
  const auto a = token_run(100, 8);
  append_and_write(cache, 0, a);
  append_and_write(cache, 1, a);  // computed again instead of attached
  cache.commit(0);
  cache.commit(1);
  cache.clear(0);
  EXPECT_EQ(cache.n_cached_blocks(), 2);
  cache.clear(1);  // its copies were never registered
  EXPECT_EQ(cache.n_cached_blocks(), 2);
  EXPECT_EQ(cache.cached_prefix_length(a), 8);
}

TEST(KvCachePrefix, CuttingIntoASharedBlockCopiesIt) {
  KvCache cache(small_shape(32, 2, 4));
  const auto prompt = token_run(100, 10);
  append_and_write(cache, 0, prompt);
  cache.commit(0);
  ASSERT_EQ(cache.attach_prefix(1, prompt), 8);
  EXPECT_EQ(cache.block_refcount(cache.block_table(0)[1]), 2);

  cache.truncate(1, 6);  // inside the shared second block
  EXPECT_EQ(cache.block_table(1)[0], cache.block_table(0)[0]);
  EXPECT_NE(cache.block_table(1)[1], cache.block_table(0)[1]);
  EXPECT_EQ(cache.block_refcount(cache.block_table(0)[1]), 1);
  const auto tail = token_run(900, 3);
  append_and_write(cache, 1, tail);

  auto branched = std::vector<TokenId>(prompt.begin(), prompt.begin() + 6);
  branched.insert(branched.end(), tail.begin(), tail.end());
  expect_consistent(cache, {prompt, branched});
  // The original block is still registered and whole.
  EXPECT_EQ(cache.cached_prefix_length(prompt), 8);
}

TEST(KvCachePrefix, CopyingWithoutRoomIsRefused) {
  KvCache cache(small_shape(8, 2, 4));  // 2 blocks
  const auto prompt = token_run(100, 8);
  append_and_write(cache, 0, prompt);
  cache.commit(0);
  ASSERT_EQ(cache.attach_prefix(1, prompt), 8);
  ASSERT_EQ(cache.n_available_blocks(), 0);
  const Snapshot before(cache);
  EXPECT_THROW(cache.truncate(1, 6), Error);  // the shared block needs a copy: no room
  EXPECT_TRUE(Snapshot(cache) == before);
  cache.truncate(1, 4);  // on the boundary: only lets go of the second block
  EXPECT_EQ(cache.block_refcount(cache.block_table(0)[1]), 1);
  cache.truncate(0, 6);  // now private: cut in place, no longer registered
  EXPECT_EQ(cache.cached_prefix_length(prompt), 4);
  expect_consistent(cache, {std::vector<TokenId>(prompt.begin(), prompt.begin() + 6),
                            std::vector<TokenId>(prompt.begin(), prompt.begin() + 4)});
}

// The registry checks what a key stands for: a key that collides with a
// registered one never finds, nor registers over, other content.
TEST(KvBlockPool, CollidingKeysNeverMatchOtherContent) {
  KvBlockPool pool(4, 2);
  const TokenId tokens[] = {7, 8};
  const TokenId other_tokens[] = {7, 9};
  const int32_t block = pool.take();
  const uint64_t id = pool.register_block(block, 42, KvBlockPool::kEmptyPrefixId, tokens);
  ASSERT_NE(id, KvBlockPool::kNoPrefixId);
  EXPECT_EQ(pool.find(42, KvBlockPool::kEmptyPrefixId, tokens), block);
  EXPECT_EQ(pool.find(42, KvBlockPool::kEmptyPrefixId, other_tokens), -1);
  EXPECT_EQ(pool.find(42, id, tokens), -1);  // same tokens after another prefix
  const int32_t other = pool.take();
  EXPECT_EQ(pool.register_block(other, 42, KvBlockPool::kEmptyPrefixId, other_tokens),
            KvBlockPool::kNoPrefixId);
  EXPECT_EQ(pool.register_block(other, 42, KvBlockPool::kEmptyPrefixId, tokens), id);  // duplicate
  EXPECT_EQ(pool.prefix_id(other), KvBlockPool::kNoPrefixId);
  // Prefix ids are never reused: after an unregistration, a child naming the
  // old id finds nothing even when the same content is registered again.
  pool.unregister(block);
  const uint64_t new_id = pool.register_block(other, 42, KvBlockPool::kEmptyPrefixId, tokens);
  EXPECT_NE(new_id, id);
  pool.release(block);
  pool.release(other);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.n_free(), 3);
}

// Forwards `ids` at the end of the sequence and returns the last row's logits.
std::vector<float> forward_last_logits(const Model& model, KvCache& cache, ForwardBuffers& buffers,
                                       int32_t seq, std::span<const TokenId> ids) {
  const auto start = static_cast<int32_t>(cache.length(seq));
  std::vector<BatchRow> rows;
  for (size_t i = 0; i < ids.size(); ++i) {
    rows.push_back({ids[i], start + static_cast<int32_t>(i), seq, i + 1 == ids.size()});
  }
  std::vector<float> logits(static_cast<size_t>(model.n_vocab()));
  CpuBackend cpu(model.pool(), buffers.cpu);
  ForwardContext ctx{cpu, buffers, RowOutput::logits};
  model.decoder().forward(rows, cache, ctx, logits);
  return logits;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Layer 0 attends to every position, layer 1 to a window: given n_ubatch,
// layer 1 keeps only what its window (and a cut of up to n_ubatch
// positions) still needs.
constexpr int64_t kWindow = 6;
constexpr int64_t kUbatch = 3;

KvCacheShape windowed_shape(int64_t n_cells, int32_t n_seq, int32_t block_size) {
  KvCacheShape shape = small_shape(n_cells, n_seq, block_size);
  shape.layers[1].window = kWindow;
  shape.n_ubatch = kUbatch;
  return shape;
}

// The rows the cache must still hold: all of layer 0, and layer 1's from
// `window_from` on.
void expect_window_rows(const KvCache& cache, int32_t seq, int64_t window_from) {
  const auto hashes = prefix_hashes(cache.tokens(seq));
  const auto length = static_cast<int64_t>(hashes.size());
  for (int64_t layer = 0; layer < kLayers; ++layer) {
    const auto keys = cache.keys(layer, seq);
    const auto values = cache.values(layer, seq);
    ASSERT_EQ(keys.cells.size(), hashes.size());
    const int64_t first = layer == 0 ? 0 : window_from;
    for (int64_t p = first; p < length; ++p) {
      const auto expected = rows_for(hashes[static_cast<size_t>(p)], layer);
      const auto pos = static_cast<size_t>(p);
      ASSERT_EQ(read_row(keys, pos, kKeyWidth), expected.k) << "layer " << layer << " pos " << p;
      ASSERT_EQ(read_row(values, pos, kValueWidth), expected.v)
          << "layer " << layer << " pos " << p;
    }
  }
}

TEST(KvCacheWindow, WindowLayersTakeTheirWindowNotTheContext) {
  KvCacheShape whole = windowed_shape(1024, 2, 4);
  whole.n_ubatch = 0;
  const KvCacheShape bounded = windowed_shape(1024, 2, 4);
  EXPECT_EQ(whole.bounded_window(), 0);
  EXPECT_EQ(bounded.bounded_window(), kWindow);
  // Per sequence: 5 + 3 kept, 3 + 3 for the next pass -> 4 blocks of 4.
  EXPECT_EQ(KvWindowRows::blocks_per_sequence(kWindow, kUbatch, 4), 4);
  const uint64_t row = (kKeyWidth + kValueWidth) * sizeof(float);
  EXPECT_EQ(KvCache::bytes_needed(whole), 2 * 1024 * row);
  EXPECT_EQ(KvCache::bytes_needed(bounded), (1024 + 2 * 4 * 4) * row);
  // A window as wide as the context saves nothing: kept whole.
  EXPECT_EQ(windowed_shape(16, 2, 4).bounded_window(), 0);
}

TEST(KvCacheWindow, RandomPassesKeepEveryRowAWindowStillSees) {
  KvCache cache(windowed_shape(512, 2, 4));
  ASSERT_EQ(cache.max_append(), kUbatch);
  std::mt19937 rng(11);
  std::vector<std::vector<TokenId>> expected(2);
  // Per sequence, the first position layer 1 must still hold: what the
  // window and a cut of n_ubatch need after the last pass, or more.
  std::vector<int64_t> held_from(2, 0);
  for (int step = 0; step < 600; ++step) {
    const auto seq = static_cast<int32_t>(rng() % 2);
    auto& tokens = expected[static_cast<size_t>(seq)];
    auto& held = held_from[static_cast<size_t>(seq)];
    const auto length = static_cast<int64_t>(tokens.size());
    if (rng() % 5 == 0 && length > 0) {
      const auto cut = static_cast<int64_t>(rng() % static_cast<uint32_t>(length));
      // A cut is served while the window rows before it are there: always
      // for one of up to n_ubatch positions after a pass.
      if (std::max<int64_t>(0, cut - kWindow + 1) >= held) {
        EXPECT_TRUE(cache.can_truncate(seq, cut)) << "cut " << cut << " of " << length;
      }
      if (cache.can_truncate(seq, cut)) {
        cache.truncate(seq, cut);
        tokens.resize(static_cast<size_t>(cut));
      } else {
        const Snapshot before(cache);
        EXPECT_THROW(cache.truncate(seq, cut), Error);
        EXPECT_TRUE(Snapshot(cache) == before);
      }
    } else if (length + kUbatch <= 200) {
      std::vector<TokenId> more(1 + rng() % kUbatch);
      for (auto& t : more) t = static_cast<TokenId>(rng() % 5);
      append_and_write(cache, seq, more);
      cache.commit(seq);
      tokens.insert(tokens.end(), more.begin(), more.end());
      held = std::max(held, static_cast<int64_t>(tokens.size()) - kWindow + 1 - kUbatch);
    } else {
      cache.clear(seq);
      tokens.clear();
      held = 0;
    }
    ASSERT_TRUE(std::ranges::equal(cache.tokens(seq), tokens));
    expect_window_rows(cache, seq, held);
  }
  // A pass far longer than n_ubatch does not fit a sequence's share.
  cache.clear_all();
  const std::vector<TokenId> too_many(
      KvWindowRows::blocks_per_sequence(kWindow, kUbatch, 4) * 4 + 1, 1);
  EXPECT_THROW(cache.append(0, too_many), Error);
  EXPECT_EQ(cache.length(0), 0);
}

TEST(KvCacheWindow, NoPrefixCacheWhenWindowRowsAreBounded) {
  KvCache cache(windowed_shape(64, 2, 4));
  const std::vector<TokenId> tokens = {1, 2, 3};
  for (int i = 0; i < 4; ++i) {
    append_and_write(cache, 0, tokens);
    cache.commit(0);
  }
  const std::vector<TokenId> prompt(cache.tokens(0).begin(), cache.tokens(0).end());
  EXPECT_EQ(cache.cached_prefix_length(prompt), 0);
  EXPECT_EQ(cache.attach_prefix(1, prompt), 0);
}

TEST(KvCachePrefix, AttachedPrefixGivesTheSameLogitsBitForBit) {
  const auto model = test::load_test_model({});
  KvCache cache(model->decoder().kv_cache_shape(256, 2, KvType::f32));
  ASSERT_EQ(cache.block_size(), 16);
  ForwardBuffers buffers;
  std::vector<TokenId> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<TokenId>((i * 37 + 11) % static_cast<size_t>(model->n_vocab()));
  }
  const auto reused = std::span<const TokenId>(prompt).first(39);  // the last token is forwarded

  const auto reference = forward_last_logits(*model, cache, buffers, 0, prompt);
  EXPECT_EQ(cache.n_used_blocks(), 3);
  ASSERT_EQ(cache.attach_prefix(1, reused), 32);  // forward committed the 2 full blocks
  EXPECT_EQ(cache.block_refcount(cache.block_table(0)[1]), 2);
  const auto attached =
      forward_last_logits(*model, cache, buffers, 1, std::span(prompt).subspan(32));
  EXPECT_TRUE(bitwise_equal(attached, reference));

  cache.clear(0);
  cache.clear(1);
  EXPECT_EQ(cache.n_used_blocks(), 0);
  EXPECT_EQ(cache.n_cached_blocks(), 2);
  ASSERT_EQ(cache.attach_prefix(0, reused), 32);
  const auto again = forward_last_logits(*model, cache, buffers, 0, std::span(prompt).subspan(32));
  EXPECT_TRUE(bitwise_equal(again, reference));
}

TEST(KvCachePrefix, FailedBatchRegistersNothing) {
  const auto model = test::load_test_model({});
  // One block: the batch fills it, then fails to get a second one.
  KvCache cache(model->decoder().kv_cache_shape(16, 1, KvType::f32));
  ForwardBuffers buffers;
  const std::vector<TokenId> prompt(20, 5);
  EXPECT_THROW(forward_last_logits(*model, cache, buffers, 0, prompt), Error);
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.cached_prefix_length(prompt), 0);
  EXPECT_EQ(cache.n_free_blocks(), cache.n_blocks());
}

}  // namespace
}  // namespace cortiq

namespace cortiq {
namespace {

// Recurrent state (LFM2's short convolutions): a fixed block of floats per
// sequence and layer, zero when the sequence is empty, never cut back (the
// caller forwards again), never entering the prefix cache; a forward pass
// that fails before its layers ran drops only the positions it appended.
TEST(KvCacheState, HoldsEachSequencesStateAndNeverCutsIt) {
  KvCacheShape shape = small_shape(64, 2, 4);
  shape.layers[1].state_width = 6;
  EXPECT_EQ(shape.state_width(), 6);
  EXPECT_EQ(KvCache::bytes_needed(shape),
            KvCache::bytes_needed(small_shape(64, 2, 4)) + 2 * 6 * sizeof(float));
  KvCache cache(shape);
  ASSERT_TRUE(cache.has_state());
  EXPECT_TRUE(cache.state(0, 0).empty());
  ASSERT_EQ(cache.state(1, 1).size(), 6u);
  const std::vector<TokenId> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  cache.append(0, tokens);
  cache.append(1, tokens);
  std::ranges::fill(cache.state(1, 0), 2.0f);
  std::ranges::fill(cache.state(1, 1), 3.0f);
  cache.commit(0);
  // Nothing was registered: a new sequence attaches no prefix.
  cache.clear(1);
  EXPECT_EQ(cache.attach_prefix(1, tokens), 0);
  EXPECT_TRUE(std::ranges::all_of(cache.state(1, 1), [](float v) { return v == 0.0f; }));

  EXPECT_FALSE(cache.can_truncate(0, 5));
  EXPECT_TRUE(cache.can_truncate(0, 9));
  EXPECT_TRUE(cache.can_truncate(0, 0));
  try {
    cache.truncate(0, 5);
    ADD_FAILURE() << "a cut into the state was allowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent state"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(0), 9);

  // A forward pass whose layers never ran drops what it appended only.
  cache.append(0, std::vector<TokenId>{10, 11});
  cache.drop_appended(0, 9);
  EXPECT_EQ(cache.length(0), 9);
  EXPECT_TRUE(std::ranges::all_of(cache.state(1, 0), [](float v) { return v == 2.0f; }));

  cache.truncate(0, 0);
  EXPECT_TRUE(std::ranges::all_of(cache.state(1, 0), [](float v) { return v == 0.0f; }));
  std::ranges::fill(cache.state(1, 0), 1.0f);
  cache.clear_all();
  EXPECT_TRUE(std::ranges::all_of(cache.state(1, 0), [](float v) { return v == 0.0f; }));
}

// A state snapshot makes its length a cut the cache can take: the cut
// restores that state exactly; a cut below drops the snapshot; a sequence
// keeps its kMaxStateSnapshots latest.
TEST(KvCacheState, SnapshotsAreCutsThatRestoreTheirState) {
  KvCacheShape shape = small_shape(64, 2, 4);
  shape.layers[1].state_width = 3;
  KvCache cache(shape);
  const auto fill = [&](float v) { std::ranges::fill(cache.state(1, 0), v); };
  const auto holds = [&](float v) {
    return std::ranges::all_of(cache.state(1, 0), [v](float x) { return x == v; });
  };
  cache.append(0, std::vector<TokenId>{1, 2, 3, 4, 5});
  fill(5.0f);
  cache.save_state_snapshot(0);
  cache.append(0, std::vector<TokenId>{6, 7, 8});
  fill(8.0f);
  EXPECT_TRUE(cache.can_truncate(0, 5));
  EXPECT_FALSE(cache.can_truncate(0, 6));
  EXPECT_EQ(cache.nearest_truncation(0, 7), 5);
  EXPECT_EQ(cache.nearest_truncation(0, 4), 0);
  cache.truncate(0, 5);
  EXPECT_EQ(cache.length(0), 5);
  EXPECT_TRUE(holds(5.0f));
  // The snapshot stays for another try; a cut below it drops it.
  cache.append(0, std::vector<TokenId>{9});
  fill(9.0f);
  cache.truncate(0, 5);
  EXPECT_TRUE(holds(5.0f));
  cache.truncate(0, 0);
  EXPECT_TRUE(cache.state_snapshot_lengths(0).empty());
  EXPECT_TRUE(holds(0.0f));
  // The latest four are kept, oldest evicted first.
  for (int i = 1; i <= 6; ++i) {
    cache.append(0, std::vector<TokenId>{i});
    cache.save_state_snapshot(0);
  }
  EXPECT_EQ(cache.state_snapshot_lengths(0), (std::vector<int64_t>{3, 4, 5, 6}));
  cache.clear_all();
  EXPECT_TRUE(cache.state_snapshot_lengths(0).empty());
}

// Speculative decoding's checkpoint: a cut to its length restores its
// state, as a snapshot's does, but it evicts no snapshot, a new checkpoint
// replaces it, a cut below or drop_checkpoint() forgets it.
TEST(KvCacheState, TheCheckpointIsACutBesideTheSnapshots) {
  KvCacheShape shape = small_shape(64, 2, 4);
  shape.layers[1].state_width = 3;
  KvCache cache(shape);
  const auto fill = [&](float v) { std::ranges::fill(cache.state(1, 0), v); };
  const auto holds = [&](float v) {
    return std::ranges::all_of(cache.state(1, 0), [v](float x) { return x == v; });
  };
  for (int i = 1; i <= 4; ++i) {
    cache.append(0, std::vector<TokenId>{i});
    fill(static_cast<float>(i));
    cache.save_state_snapshot(0);
  }
  cache.append(0, std::vector<TokenId>{5});
  fill(5.0f);
  cache.checkpoint_state(0);
  EXPECT_EQ(cache.state_snapshot_lengths(0), (std::vector<int64_t>{1, 2, 3, 4}));
  cache.append(0, std::vector<TokenId>{6, 7});
  fill(7.0f);
  EXPECT_TRUE(cache.can_truncate(0, 5));
  EXPECT_FALSE(cache.can_truncate(0, 6));
  EXPECT_EQ(cache.nearest_truncation(0, 6), 5);
  cache.truncate(0, 5);
  EXPECT_TRUE(holds(5.0f));
  // Still there for the next round; a new one replaces it.
  cache.append(0, std::vector<TokenId>{6});
  fill(6.0f);
  EXPECT_TRUE(cache.can_truncate(0, 5));
  cache.checkpoint_state(0);
  cache.append(0, std::vector<TokenId>{7});
  fill(7.5f);
  EXPECT_FALSE(cache.can_truncate(0, 5));
  cache.truncate(0, 6);
  EXPECT_TRUE(holds(6.0f));
  cache.drop_checkpoint(0);
  cache.append(0, std::vector<TokenId>{7});
  EXPECT_FALSE(cache.can_truncate(0, 6));
  // A cut below it (to a snapshot) forgets it.
  cache.checkpoint_state(0);
  cache.truncate(0, 4);
  EXPECT_TRUE(holds(4.0f));
  cache.append(0, std::vector<TokenId>{5, 6, 7, 8});
  EXPECT_FALSE(cache.can_truncate(0, 7));  // the forgotten checkpoint's length
}

// Prefix states: a sequence with recurrent state attaches registered blocks
// only up to the last one whose end has a kept state, and starts from that
// state; registered_prefix_length still sees the whole chain. The slots are
// reused least recently used first, a rolling state gives its slot back to
// the same sequence's next one, and a state whose block left the prefix
// cache is never attached.
TEST(KvCacheState, PrefixStatesLetAStatefulSequenceAttach) {
  KvCacheShape shape = small_shape(32, 2, 4);  // 8 blocks of 4
  shape.layers[1].state_width = 3;
  shape.n_prefix_states = 2;
  EXPECT_EQ(KvCache::bytes_needed(shape),
            KvCache::bytes_needed(small_shape(32, 2, 4)) + (2 + 2) * 3 * sizeof(float));
  KvCache cache(shape);
  const auto fill = [&](int32_t seq, float v) { std::ranges::fill(cache.state(1, seq), v); };
  const auto holds = [&](int32_t seq, float v) {
    return std::ranges::all_of(cache.state(1, seq), [v](float x) { return x == v; });
  };
  const std::vector<TokenId> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const auto first = [&](size_t n) { return std::span<const TokenId>(tokens).first(n); };

  cache.append(0, first(8));
  fill(0, 8.0f);
  EXPECT_FALSE(cache.save_prefix_state(0)) << "not committed yet";
  cache.commit(0);
  EXPECT_TRUE(cache.save_prefix_state(0));
  cache.append(0, std::span<const TokenId>(tokens).subspan(8, 5));
  fill(0, 13.0f);
  cache.commit(0);
  EXPECT_FALSE(cache.save_prefix_state(0)) << "13 is inside a block";
  EXPECT_EQ(cache.n_prefix_states(), 1);

  EXPECT_EQ(cache.registered_prefix_length(tokens), 12);
  EXPECT_EQ(cache.cached_prefix_length(tokens), 8);
  EXPECT_EQ(cache.attach_prefix(1, tokens), 8);
  EXPECT_TRUE(holds(1, 8.0f));
  EXPECT_EQ(cache.tokens(1).size(), 8u);
  EXPECT_EQ(cache.block_refcount(cache.block_table(1)[1]), 2);
  cache.clear(1);

  // A rolling state replaces the sequence's previous rolling one only.
  cache.clear(0);
  cache.append(0, first(4));
  fill(0, 4.0f);
  cache.commit(0);
  EXPECT_TRUE(cache.save_prefix_state(0, /*rolling=*/true));
  EXPECT_EQ(cache.cached_prefix_length(tokens), 8);
  cache.append(0, std::span<const TokenId>(tokens).subspan(4, 8));
  fill(0, 12.0f);
  cache.commit(0);
  EXPECT_TRUE(cache.save_prefix_state(0, /*rolling=*/true));
  EXPECT_EQ(cache.n_prefix_states(), 2);  // 8 (kept) and 12; 4 gave its slot back
  EXPECT_EQ(cache.cached_prefix_length(first(7)), 0);
  EXPECT_EQ(cache.cached_prefix_length(tokens), 12);
  EXPECT_EQ(cache.attach_prefix(1, tokens), 12);
  EXPECT_TRUE(holds(1, 12.0f));
  cache.clear(1);

  // Two slots: a third state evicts the least recently used (8; 12 was
  // just attached).
  cache.clear(0);  // the sequence's rolling state stays, as any other
  const std::vector<TokenId> other = {50, 51, 52, 53};
  cache.append(1, other);
  fill(1, 50.0f);
  cache.commit(1);
  EXPECT_TRUE(cache.save_prefix_state(1));
  EXPECT_EQ(cache.cached_prefix_length(first(11)), 0);
  EXPECT_EQ(cache.cached_prefix_length(tokens), 12);
  cache.clear(1);

  // A state whose block is evicted (taken for new content) is stale.
  for (int32_t i = 0; i < 8; ++i) cache.append(0, std::vector<TokenId>{100 + i, 0, 0, 0});
  cache.clear(0);
  EXPECT_EQ(cache.cached_prefix_length(tokens), 0);
  EXPECT_EQ(cache.cached_prefix_length(other), 0);
  EXPECT_EQ(cache.n_prefix_states(), 0);
  EXPECT_EQ(cache.attach_prefix(1, tokens), 0);
  EXPECT_TRUE(holds(1, 0.0f));
}

}  // namespace
}  // namespace cortiq
