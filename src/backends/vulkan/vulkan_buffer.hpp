// Storage buffers with their own memory. Device-local buffers are what the
// kernels read and write; where that memory is also host-visible (lavapipe,
// integrated GPUs, resizable BAR) they are mapped and copied to directly,
// elsewhere (discrete GPUs) upload and download go through a host-visible
// staging buffer and a copy on the queue. Host-visible buffers are always
// mapped.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/vulkan/vulkan_handle.hpp"

namespace cortiq::vulkan {

class VulkanDevice;

enum class MemoryKind {
  device_local,  // fastest for the device; mapped only when it happens to be host-visible
  host_visible,  // host-visible and coherent (cached where the device offers it)
};

// How upload and download reach a device-local buffer: by its mapping when
// it has one, or always by staging (for tests of the path discrete GPUs take).
enum class HostAccess { mapped_when_possible, staging_only };

class VulkanBuffer {
 public:
  // A buffer of `bytes` bytes (the memory is rounded up to whole 32-bit
  // words, which the shaders read). Throws cortiq::Error naming the size
  // when the device cannot give it.
  VulkanBuffer(VulkanDevice& device, uint64_t bytes, MemoryKind kind = MemoryKind::device_local,
               HostAccess access = HostAccess::mapped_when_possible);
  VulkanBuffer(VulkanBuffer&&) noexcept = default;
  VulkanBuffer& operator=(VulkanBuffer&&) noexcept = default;

  uint64_t size() const { return size_; }
  VkBuffer handle() const { return buffer_.get(); }
  bool mapped() const { return mapping_ != nullptr; }
  VulkanDevice& device() const { return *device_; }

  // Host bytes into the buffer at `offset`, and back. Through a staging
  // buffer these submit and wait, so use them between batches, not in one.
  void upload(std::span<const std::byte> bytes, uint64_t offset = 0);
  void download(std::span<std::byte> bytes, uint64_t offset = 0) const;
  void upload(std::span<const float> values, uint64_t offset = 0) {
    upload(std::as_bytes(values), offset);
  }
  std::vector<float> download_floats() const;

 private:
  void check_range(uint64_t offset, uint64_t bytes) const;

  VulkanDevice* device_;
  uint64_t size_;
  // The buffer is destroyed before the memory it is bound to.
  DeviceMemory memory_;
  Buffer buffer_;
  std::byte* mapping_ = nullptr;  // into memory_, unmapped when it is freed
};

}  // namespace cortiq::vulkan
