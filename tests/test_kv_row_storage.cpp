// The KV cache as a manager over a storage it does not own
// (kv/kv_row_storage.hpp): every row it keeps is written, and every
// shared block copied on write, through the storage at the offsets the
// manager lays out, so a device backend can hold the rows instead of host
// memory. A storage without host bytes makes the host attention views fail
// by name rather than read memory that is not there.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "kv/kv_cache.hpp"

namespace cortiq {
namespace {

struct StorageLog {
  int stores = 0;
  int copies = 0;
  std::vector<size_t> key_offsets;
};

// Host rows that log what the cache asks of them; `hidden` pretends they
// live on a device (no host bytes).
class LoggedRows final : public KvRowStorage {
 public:
  LoggedRows(size_t k_bytes, size_t v_bytes, StorageLog& log, bool hidden)
      : rows_(k_bytes, v_bytes), log_(log), hidden_(hidden) {}

  void store_row(KvSide side, size_t offset, std::span<const float> row, KvType type) override {
    ++log_.stores;
    if (side == KvSide::keys) log_.key_offsets.push_back(offset);
    rows_.store_row(side, offset, row, type);
  }
  void copy(KvSide side, size_t from_offset, size_t to_offset, size_t bytes) override {
    ++log_.copies;
    rows_.copy(side, from_offset, to_offset, bytes);
  }
  const std::byte* host_bytes(KvSide side) const override {
    return hidden_ ? nullptr : rows_.host_bytes(side);
  }

 private:
  HostKvRows rows_;
  StorageLog& log_;
  bool hidden_;
};

constexpr int64_t kLayers = 2, kWidth = 4;

KvRowStorage::Factory logged(StorageLog& log, bool hidden = false) {
  return [&log, hidden](size_t k_bytes, size_t v_bytes) {
    return std::make_unique<LoggedRows>(k_bytes, v_bytes, log, hidden);
  };
}

// Row of position p in layer il: every float p * 10 + il.
std::vector<float> row_of(int32_t pos, int64_t il) {
  return std::vector<float>(kWidth, static_cast<float>(pos * 10 + il));
}

void fill(KvCache& cache, int32_t seq, const std::vector<TokenId>& tokens,
          int64_t n_layers = kLayers) {
  const auto cells = cache.append(seq, tokens);
  const auto start = static_cast<int32_t>(cache.length(seq)) - static_cast<int32_t>(cells.size());
  for (int64_t il = 0; il < n_layers; ++il) {
    for (size_t i = 0; i < cells.size(); ++i) {
      cache.store_k(il, cells[i], row_of(start + static_cast<int32_t>(i), il));
      cache.store_v(il, cells[i], row_of(start + static_cast<int32_t>(i), il));
    }
  }
  cache.commit(seq);
}

float first_key(const KvCache& cache, int64_t il, int32_t seq, size_t pos) {
  const kernels::KvRowsView keys = cache.keys(il, seq);
  const auto cell = static_cast<size_t>(keys.cells[pos]);
  float v = 0;
  std::memcpy(&v, keys.base + cell * keys.row_bytes, sizeof v);
  return v;
}

TEST(KvRowStorage, TheCacheKeepsItsRowsThroughItsStorage) {
  StorageLog log;
  KvCache cache(KvCacheShape::uniform(kLayers, kWidth, kWidth, 64, 2, KvType::f32), logged(log));
  std::vector<TokenId> tokens(32);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i + 3);
  fill(cache, 0, tokens);
  EXPECT_EQ(log.stores, 2 * kLayers * 32);
  // The offsets are the manager's layout: layer 1's cell c at row_offset.
  EXPECT_EQ(log.key_offsets.back(), cache.row_offset(KvSide::keys, 1, cache.cells(0)[31]));

  // Sequence 1 shares both blocks; cut into the second, it gets a copy of
  // that block's first rows, made by the storage, and reads the same keys.
  ASSERT_EQ(cache.attach_prefix(1, tokens), 32);
  EXPECT_EQ(log.copies, 0);
  cache.truncate(1, 20);
  EXPECT_EQ(log.copies, 2 * kLayers);
  EXPECT_NE(cache.cells(1)[19], cache.cells(0)[19]);
  for (int64_t il = 0; il < kLayers; ++il) {
    for (size_t pos = 0; pos < 20; ++pos) {
      EXPECT_EQ(first_key(cache, il, 1, pos), first_key(cache, il, 0, pos));
    }
  }
}

TEST(KvRowStorage, RowsOnADeviceAreRefusedToHostAttention) {
  StorageLog log;
  KvCache cache(KvCacheShape::uniform(kLayers, kWidth, kWidth, 32, 1, KvType::f16),
                logged(log, /*hidden=*/true));
  fill(cache, 0, {5, 6, 7});
  EXPECT_EQ(log.stores, 2 * kLayers * 3);
  EXPECT_THROW((void)cache.keys(0, 0), Error);
  EXPECT_THROW((void)cache.values(1, 0), Error);
  EXPECT_EQ(cache.layer_cells(0, 0).size(), 3u);
}

// Layers in parts (what a pass split between backends keeps): each part's
// storage holds its own layers' rows, laid out from its offset 0; host
// attention reads the host part and is refused the device one by layer.
TEST(KvRowStorage, EachPartKeepsTheRowsOfItsLayers) {
  constexpr int64_t kParts = 3;
  StorageLog host_log, device_log;
  const std::array parts{KvRowsPart{0, logged(host_log)},
                         KvRowsPart{1, logged(device_log, /*hidden=*/true)}};
  KvCache cache(KvCacheShape::uniform(kParts, kWidth, kWidth, 32, 1, KvType::f32), parts);
  fill(cache, 0, {5, 6, 7}, kParts);
  EXPECT_EQ(host_log.stores, 2 * 3);
  EXPECT_EQ(device_log.stores, 2 * 2 * 3);
  EXPECT_EQ(cache.row_offset(KvSide::keys, 0, cache.cells(0)[0]),
            cache.row_offset(KvSide::keys, 1, cache.cells(0)[0]));
  EXPECT_NE(&cache.row_storage(0), &cache.row_storage(1));
  EXPECT_EQ(&cache.row_storage(1), &cache.row_storage(2));
  EXPECT_EQ(first_key(cache, 0, 0, 2), row_of(2, 0)[0]);
  try {
    (void)cache.keys(2, 0);
    ADD_FAILURE() << "device rows read from the host";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2's rows live on a device"), std::string::npos);
  }
  const auto out_of_order =
      std::array{KvRowsPart{0, logged(host_log)}, KvRowsPart{0, logged(host_log)}};
  EXPECT_THROW(
      KvCache(KvCacheShape::uniform(kParts, kWidth, kWidth, 32, 1, KvType::f32), out_of_order),
      Error);
}

}  // namespace
}  // namespace cortiq
