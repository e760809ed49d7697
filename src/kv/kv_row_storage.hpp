// Where a KvCache keeps its rows of keys and values. The cache itself
// (kv/kv_cache.hpp) is the device-neutral manager: blocks, sequences,
// the prefix cache, the window rows, snapshots. It lays every layer's rows
// out at byte offsets in two regions, keys and values, and asks its storage
// to write, copy and expose them. HostKvRows keeps them in host memory for
// the CPU kernels; a device backend gives a storage of its own whose rows
// live on the device (its attention op reads them there) and that exposes
// no host bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cortiq/types.hpp"

namespace cortiq {

enum class KvSide : uint8_t { keys, values };

class KvRowStorage {
 public:
  virtual ~KvRowStorage() = default;

  // One row of floats, stored as `type` at `offset` bytes into the side.
  virtual void store_row(KvSide side, size_t offset, std::span<const float> row, KvType type) = 0;
  // bytes from one offset to another within a side (a block copied on write).
  virtual void copy(KvSide side, size_t from_offset, size_t to_offset, size_t bytes) = 0;
  // The side's bytes in host memory, or null where they live on a device.
  virtual const std::byte* host_bytes(KvSide side) const = 0;

  // Makes the storage for a cache whose layout needs these sizes; throws
  // std::bad_alloc (or cortiq::Error) when the memory is not there.
  using Factory = std::function<std::unique_ptr<KvRowStorage>(size_t k_bytes, size_t v_bytes)>;
};

// The rows of a run of layers, from first_layer up to the next part's
// first layer, in a storage of their own: a pass split between backends
// (-ngl) keeps each backend's layers where that backend reads them.
struct KvRowsPart {
  int64_t first_layer = 0;
  KvRowStorage::Factory make;
};

// The rows in host memory: what the CPU kernels read.
class HostKvRows final : public KvRowStorage {
 public:
  HostKvRows(size_t k_bytes, size_t v_bytes) : keys_(k_bytes), values_(v_bytes) {}

  static std::unique_ptr<KvRowStorage> make(size_t k_bytes, size_t v_bytes) {
    return std::make_unique<HostKvRows>(k_bytes, v_bytes);
  }

  void store_row(KvSide side, size_t offset, std::span<const float> row, KvType type) override;
  void copy(KvSide side, size_t from_offset, size_t to_offset, size_t bytes) override;
  const std::byte* host_bytes(KvSide side) const override {
    return side == KvSide::keys ? keys_.data() : values_.data();
  }

 private:
  std::vector<std::byte>& bytes(KvSide side) { return side == KvSide::keys ? keys_ : values_; }

  std::vector<std::byte> keys_;    // [layer][cell][the layer's k_width]
  std::vector<std::byte> values_;  // [layer][cell][the layer's v_width]
};

}  // namespace cortiq
