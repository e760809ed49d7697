#include "backends/vulkan/vulkan_buffer.hpp"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "backends/vulkan/vulkan_commands.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#include "backends/vulkan/vulkan_error.hpp"
#include "base/fault_injection.hpp"

namespace cortiq::vulkan {
namespace {

constexpr VkMemoryPropertyFlags kHostCoherent =
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

std::string size_text(uint64_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes (" + mib + ")";
}

const char* kind_name(MemoryKind kind) {
  return kind == MemoryKind::device_local ? "device-local" : "host-visible";
}

// The first allowed type with all of `required`, and with `preferred` too if
// one has it. The driver lists types best first, so the first device-local
// type of a discrete GPU is its plain video memory.
std::optional<uint32_t> find_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t allowed,
                                  VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  std::optional<uint32_t> fallback;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if (!((allowed >> i) & 1u) || (flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (!fallback) fallback = i;
  }
  return fallback;
}

uint32_t choose_type(const VulkanDevice& device, uint32_t allowed, MemoryKind kind) {
  const VkPhysicalDeviceMemoryProperties& memory = device.memory_properties();
  const std::optional<uint32_t> type =
      kind == MemoryKind::device_local
          ? find_type(memory, allowed, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
          : find_type(memory, allowed, kHostCoherent, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (type) return *type;
  // Device-local memory is optional for no buffer usage, but be safe: any
  // allowed type computes correctly.
  if (kind == MemoryKind::device_local) {
    if (const auto any = find_type(memory, allowed, 0, 0)) return *any;
  }
  throw Error(std::string("vulkan: device ") + device.info().name + " has no " + kind_name(kind) +
              " memory type for storage buffers");
}

// Refuses what the device cannot hold before Vulkan is asked: a VkBuffer or
// allocation over the device's limits is invalid usage, not an error code.
void check_size(const VulkanDevice& device, uint64_t bytes, MemoryKind kind) {
  const VulkanLimits& limits = device.limits();
  const auto refuse = [&](const std::string& why) {
    throw Error("vulkan: cannot allocate a " + std::string(kind_name(kind)) + " buffer of " +
                size_text(bytes) + ": " + why);
  };
  if (bytes == 0) refuse("empty buffers are not allowed");
  if (bytes > limits.max_buffer_bytes) {
    refuse("the device's buffers hold at most " + size_text(limits.max_buffer_bytes));
  }
  if (bytes > limits.max_allocation_bytes) {
    refuse("one allocation holds at most " + size_text(limits.max_allocation_bytes));
  }
}

Buffer create_buffer(VkDevice device, uint64_t bytes) {
  auto info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  check(vkCreateBuffer(device, &info, nullptr, &buffer),
        "vkCreateBuffer (" + size_text(bytes) + ")");
  return Buffer(device, buffer);
}

}  // namespace

VulkanBuffer::VulkanBuffer(VulkanDevice& device, uint64_t bytes, MemoryKind kind, HostAccess access)
    : device_(&device), size_(bytes) {
  const uint64_t padded = (bytes + 3) / 4 * 4;
  check_size(device, padded, kind);
  const VkDevice vk = device.handle();
  buffer_ = create_buffer(vk, padded);
  VkMemoryRequirements needs{};
  vkGetBufferMemoryRequirements(vk, buffer_.get(), &needs);
  const uint32_t type = choose_type(device, needs.memoryTypeBits, kind);
  const VkMemoryType& memory_type = device.memory_properties().memoryTypes[type];
  const uint64_t heap = device.memory_properties().memoryHeaps[memory_type.heapIndex].size;
  if (needs.size > heap) {
    throw Error("vulkan: cannot allocate a " + std::string(kind_name(kind)) + " buffer of " +
                size_text(bytes) + ": its memory heap holds " + size_text(heap));
  }
  auto info = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  info.allocationSize = needs.size;
  info.memoryTypeIndex = type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const VkResult allocated = fault::due(fault::Site::device_alloc)
                                 ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                                 : vkAllocateMemory(vk, &info, nullptr, &memory);
  check(allocated, "vkAllocateMemory (" + size_text(needs.size) + ", " + kind_name(kind) + ")");
  memory_ = DeviceMemory(vk, memory);
  check(vkBindBufferMemory(vk, buffer_.get(), memory_.get(), 0), "vkBindBufferMemory");

  const bool coherent = (memory_type.propertyFlags & kHostCoherent) == kHostCoherent;
  const bool map = kind == MemoryKind::host_visible || access == HostAccess::mapped_when_possible;
  if (coherent && map) {
    void* pointer = nullptr;
    check(vkMapMemory(vk, memory_.get(), 0, VK_WHOLE_SIZE, 0, &pointer), "vkMapMemory");
    mapping_ = static_cast<std::byte*>(pointer);
  }
}

void VulkanBuffer::check_range(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) {
    throw Error("vulkan: " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                " lie outside a buffer of " + std::to_string(size_));
  }
}

void VulkanBuffer::upload(std::span<const std::byte> bytes, uint64_t offset) {
  check_range(offset, bytes.size());
  if (bytes.empty()) return;
  if (mapped()) {
    // Coherent memory: host writes are visible to the device at the next submit.
    std::memcpy(mapping_ + offset, bytes.data(), bytes.size());
    return;
  }
  VulkanBuffer staging(*device_, bytes.size(), MemoryKind::host_visible);
  std::memcpy(staging.mapping_, bytes.data(), bytes.size());
  CommandBatch batch(*device_);
  batch.copy(staging, 0, *this, offset, bytes.size());
  batch.submit_and_wait();
}

void VulkanBuffer::download(std::span<std::byte> bytes, uint64_t offset) const {
  check_range(offset, bytes.size());
  if (bytes.empty()) return;
  if (mapped()) {
    std::memcpy(bytes.data(), mapping_ + offset, bytes.size());
    return;
  }
  VulkanBuffer staging(*device_, bytes.size(), MemoryKind::host_visible);
  CommandBatch batch(*device_);
  batch.copy(*this, offset, staging, 0, bytes.size());
  batch.submit_and_wait();
  std::memcpy(bytes.data(), staging.mapping_, bytes.size());
}

std::vector<float> VulkanBuffer::download_floats() const {
  std::vector<float> values(size_ / sizeof(float));
  download(std::as_writable_bytes(std::span<float>(values)));
  return values;
}

}  // namespace cortiq::vulkan
