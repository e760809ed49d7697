// Owning wrappers of Vulkan handles: each destroys its handle once, in its
// destructor, and moves but never copies. Objects made from a VkDevice keep
// the device beside the handle because their destroy call needs it.
#pragma once

#include <vulkan/vulkan.h>

#include <utility>

namespace cortiq::vulkan {

// A zeroed Vulkan info structure with its sType set (a braced {sType} would
// warn about every field left out).
template <typename Info>
Info vk_struct(VkStructureType type) {
  Info info{};
  info.sType = type;
  return info;
}

// A handle destroyed by Destroy(handle, allocator): VkInstance, VkDevice.
template <typename Handle, void (*Destroy)(Handle, const VkAllocationCallbacks*)>
class RootHandle {
 public:
  RootHandle() = default;
  explicit RootHandle(Handle handle) : handle_(handle) {}
  ~RootHandle() { reset(); }
  RootHandle(RootHandle&& other) noexcept : handle_(std::exchange(other.handle_, VK_NULL_HANDLE)) {}
  RootHandle& operator=(RootHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
    }
    return *this;
  }
  RootHandle(const RootHandle&) = delete;
  RootHandle& operator=(const RootHandle&) = delete;

  Handle get() const { return handle_; }
  void reset() {
    if (handle_ != VK_NULL_HANDLE) Destroy(std::exchange(handle_, VK_NULL_HANDLE), nullptr);
  }

 private:
  Handle handle_ = VK_NULL_HANDLE;
};

// A handle destroyed by Destroy(device, handle, allocator).
template <typename Handle, void (*Destroy)(VkDevice, Handle, const VkAllocationCallbacks*)>
class DeviceHandle {
 public:
  DeviceHandle() = default;
  DeviceHandle(VkDevice device, Handle handle) : device_(device), handle_(handle) {}
  ~DeviceHandle() { reset(); }
  DeviceHandle(DeviceHandle&& other) noexcept
      : device_(other.device_), handle_(std::exchange(other.handle_, VK_NULL_HANDLE)) {}
  DeviceHandle& operator=(DeviceHandle&& other) noexcept {
    if (this != &other) {
      reset();
      device_ = other.device_;
      handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
    }
    return *this;
  }
  DeviceHandle(const DeviceHandle&) = delete;
  DeviceHandle& operator=(const DeviceHandle&) = delete;

  Handle get() const { return handle_; }
  void reset() {
    if (handle_ != VK_NULL_HANDLE)
      Destroy(device_, std::exchange(handle_, VK_NULL_HANDLE), nullptr);
  }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  Handle handle_ = VK_NULL_HANDLE;
};

using Instance = RootHandle<VkInstance, vkDestroyInstance>;
using Device = RootHandle<VkDevice, vkDestroyDevice>;
using Buffer = DeviceHandle<VkBuffer, vkDestroyBuffer>;
using DeviceMemory = DeviceHandle<VkDeviceMemory, vkFreeMemory>;
using CommandPool = DeviceHandle<VkCommandPool, vkDestroyCommandPool>;
using Fence = DeviceHandle<VkFence, vkDestroyFence>;
using ShaderModule = DeviceHandle<VkShaderModule, vkDestroyShaderModule>;
using DescriptorSetLayout = DeviceHandle<VkDescriptorSetLayout, vkDestroyDescriptorSetLayout>;
using DescriptorPool = DeviceHandle<VkDescriptorPool, vkDestroyDescriptorPool>;
using PipelineLayout = DeviceHandle<VkPipelineLayout, vkDestroyPipelineLayout>;
using Pipeline = DeviceHandle<VkPipeline, vkDestroyPipeline>;

}  // namespace cortiq::vulkan
