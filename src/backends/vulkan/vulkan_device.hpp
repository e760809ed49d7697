// A Vulkan device opened for compute: the instance, the chosen physical
// device, a logical device with one compute queue, a command pool and the
// fence a submission is waited on. One VulkanDevice is used by one thread at
// a time; work is recorded into a CommandBatch (vulkan_commands.hpp) and
// submitted once.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_handle.hpp"

namespace cortiq::vulkan {

class PipelineCache;

struct VulkanDeviceInfo {
  uint32_t index = 0;  // in the loader's order; what VulkanDevice(index) opens
  std::string name;
  std::string type;                 // "discrete", "integrated", "virtual", "cpu" or "other"
  uint64_t device_local_bytes = 0;  // the device-local heaps together
  // The default subgroup size, and the range VK_EXT_subgroup_size_control
  // (core in 1.3) can ask for; min = max = subgroup_size without it. The
  // kernels are correct for any size: they reduce in shared memory.
  uint32_t subgroup_size = 0;
  uint32_t min_subgroup_size = 0;
  uint32_t max_subgroup_size = 0;
  uint32_t api_version = 0;  // VK_MAKE_API_VERSION's packing
};

// What the ops check their sizes against.
struct VulkanLimits {
  uint64_t max_storage_buffer_range = 0;  // bytes one storage-buffer binding may span
  uint64_t max_allocation_bytes = 0;      // one vkAllocateMemory
  uint64_t max_buffer_bytes = 0;          // one VkBuffer
  std::array<uint32_t, 3> max_workgroups{};
};

// "1.3.230".
std::string api_version_string(uint32_t version);

// "llvmpipe (LLVM 15.0.6, 256 bits) (cpu, subgroup 8, 2.0 GiB)".
std::string describe(const VulkanDeviceInfo& info);

// Every device the Vulkan loader finds; empty when it finds no driver (no
// ICD installed). Throws cortiq::Error for any other failure.
std::vector<VulkanDeviceInfo> list_vulkan_devices();

class VulkanDevice {
 public:
  // Opens device `index` of list_vulkan_devices(). Throws cortiq::Error when
  // there is no such device, it lacks Vulkan 1.2 (the shaders' SPIR-V 1.5)
  // or a compute queue.
  explicit VulkanDevice(uint32_t index = 0);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  const VulkanDeviceInfo& info() const { return info_; }
  const VulkanLimits& limits() const { return limits_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  VkDevice handle() const { return device_.get(); }
  VkCommandPool command_pool() const { return pool_.get(); }

  // Submits a recorded command buffer to the compute queue and waits until
  // it has run. Throws DeviceLost when the device is lost meanwhile.
  void submit_and_wait(VkCommandBuffer commands);

  // The compute pipelines, built on first use and kept for the device's life.
  PipelineCache& pipelines() { return *pipelines_; }

 private:
  // Destroyed in reverse: pipelines, fence and pool before the device, the
  // device before the instance.
  Instance instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VulkanDeviceInfo info_;
  VulkanLimits limits_;
  VkPhysicalDeviceMemoryProperties memory_{};
  uint32_t queue_family_ = 0;
  Device device_;
  VkQueue queue_ = VK_NULL_HANDLE;
  CommandPool pool_;
  Fence fence_;
  std::unique_ptr<PipelineCache> pipelines_;
};

}  // namespace cortiq::vulkan
