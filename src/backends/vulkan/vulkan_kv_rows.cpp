#include "backends/vulkan/vulkan_kv_rows.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/vulkan/vulkan_commands.hpp"
#include "base/error.hpp"
#include "base/fp16.hpp"

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
  VulkanBuffer& to = side == KvSide::keys ? keys_ : values_;
  if (type == KvType::f32) return to.upload(row, offset);
  std::vector<uint16_t> halves(row.size());
  std::ranges::transform(row, halves.begin(), fp32_to_fp16);
  to.upload(std::as_bytes(std::span(halves)), offset);
}

void VulkanKvRows::copy(KvSide side, size_t from_offset, size_t to_offset, size_t bytes) {
  if (bytes == 0) return;
  const VulkanBuffer& b = buffer(side);
  CommandBatch batch(device_);
  batch.copy(b, from_offset, b, to_offset, bytes);
  batch.submit_and_wait();
}

}  // namespace cortiq::vulkan
