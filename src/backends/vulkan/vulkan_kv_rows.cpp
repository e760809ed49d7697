#include "backends/vulkan/vulkan_kv_rows.hpp"

#include <algorithm>

#include "backends/vulkan/vulkan_commands.hpp"
#include "base/error.hpp"

namespace cortiq::vulkan {

VulkanKvRows::VulkanKvRows(VulkanDevice& device, size_t k_bytes, size_t v_bytes)
    : device_(device),
      keys_(device, std::max<size_t>(k_bytes, 4)),
      values_(device, std::max<size_t>(v_bytes, 4)) {}

KvRowStorage::Factory VulkanKvRows::on(VulkanDevice& device) {
  return [&device](size_t k_bytes, size_t v_bytes) -> std::unique_ptr<KvRowStorage> {
    return std::make_unique<VulkanKvRows>(device, k_bytes, v_bytes);
  };
}

void VulkanKvRows::store_row(KvSide side, size_t offset, std::span<const float> row, KvType type) {
  if (type != KvType::f32) throw Error("the Vulkan backend keeps f32 KV rows only (-ctk f32)");
  (side == KvSide::keys ? keys_ : values_).upload(row, offset);
}

void VulkanKvRows::copy(KvSide side, size_t from_offset, size_t to_offset, size_t bytes) {
  if (bytes == 0) return;
  const VulkanBuffer& b = buffer(side);
  CommandBatch batch(device_);
  batch.copy(b, from_offset, b, to_offset, bytes);
  batch.submit_and_wait();
}

}  // namespace cortiq::vulkan
