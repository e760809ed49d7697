// A KV cache's rows on a Vulkan device (kv/kv_row_storage.hpp): the
// keys and values of every layer in two device buffers, f32 or f16, at the byte
// offsets the cache lays out. The backend's store_kv copies rows in and its
// attention reads them there; nothing of them is in host memory.
#pragma once

#include <cstddef>
#include <memory>

#include "backends/vulkan/vulkan_buffer.hpp"
#include "kv/kv_row_storage.hpp"

namespace cortiq::vulkan {

class VulkanDevice;

class VulkanKvRows final : public KvRowStorage {
 public:
  VulkanKvRows(VulkanDevice& device, size_t k_bytes, size_t v_bytes);

  // A factory for KvCache that puts the rows on `device` (which outlives them).
  static Factory on(VulkanDevice& device);

  const VulkanBuffer& buffer(KvSide side) const { return side == KvSide::keys ? keys_ : values_; }

  // A row from the host (rounded to f16 for an f16 cache), and a block
  // copied on write: each in a
  // submit of its own, outside any pass.
  void store_row(KvSide side, size_t offset, std::span<const float> row, KvType type) override;
  void copy(KvSide side, size_t from_offset, size_t to_offset, size_t bytes) override;
  const std::byte* host_bytes(KvSide) const override { return nullptr; }

 private:
  VulkanDevice& device_;
  VulkanBuffer keys_, values_;
};

}  // namespace cortiq::vulkan
