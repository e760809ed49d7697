#include "backends/vulkan/vulkan_device.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "backends/vulkan/vulkan_error.hpp"
#include "backends/vulkan/vulkan_pipeline.hpp"

namespace cortiq::vulkan {
namespace {

// The newest version the loader offers, at most 1.3 (what the engine knows).
uint32_t instance_api_version() {
  uint32_t version = VK_API_VERSION_1_0;
  // vkEnumerateInstanceVersion is a 1.1 entry point: a 1.0 loader lacks it.
  const auto enumerate = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  if (enumerate != nullptr) check(enumerate(&version), "vkEnumerateInstanceVersion");
  return std::min(version, static_cast<uint32_t>(VK_API_VERSION_1_3));
}

// An instance, or nullopt when the loader finds no driver at all.
std::optional<Instance> create_instance() {
  auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "cortiq";
  app.pEngineName = "cortiq";
  app.apiVersion = instance_api_version();
  auto info = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = vkCreateInstance(&info, nullptr, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) return std::nullopt;  // no ICD
  check(result, "vkCreateInstance");
  return Instance(instance);
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  // A device may vanish between the two calls: VK_INCOMPLETE is no error.
  const VkResult result = vkEnumeratePhysicalDevices(instance, &count, devices.data());
  if (result != VK_INCOMPLETE) check(result, "vkEnumeratePhysicalDevices");
  devices.resize(count);
  return devices;
}

std::string_view type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

bool has_extension(VkPhysicalDevice device, std::string_view name) {
  uint32_t count = 0;
  check(vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> extensions(count);
  const VkResult result =
      vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  if (result != VK_INCOMPLETE) check(result, "vkEnumerateDeviceExtensionProperties");
  extensions.resize(count);
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return name == e.extensionName; });
}

uint64_t device_local_bytes(const VkPhysicalDeviceMemoryProperties& memory) {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i) {
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      bytes += memory.memoryHeaps[i].size;
    }
  }
  return bytes;
}

struct Queried {
  VulkanDeviceInfo info;
  VulkanLimits limits;
  VkPhysicalDeviceMemoryProperties memory{};
};

// Properties through vkGetPhysicalDeviceProperties2 (1.1): the subgroup
// size, the size-control range where the device has it, the allocation and
// buffer maxima.
Queried query(VkPhysicalDevice device, uint32_t index) {
  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(device, &base);
  Queried q;
  q.info.index = index;
  q.info.name = base.deviceName;
  q.info.type = type_name(base.deviceType);
  q.info.api_version = base.apiVersion;
  q.limits.max_storage_buffer_range = base.limits.maxStorageBufferRange;
  q.limits.max_allocation_bytes = UINT64_MAX;
  q.limits.max_buffer_bytes = UINT64_MAX;
  std::copy_n(base.limits.maxComputeWorkGroupCount, 3, q.limits.max_workgroups.begin());
  vkGetPhysicalDeviceMemoryProperties(device, &q.memory);
  q.info.device_local_bytes = device_local_bytes(q.memory);
  if (base.apiVersion < VK_API_VERSION_1_1) return q;  // no properties2: sizes unknown

  auto properties =
      vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  auto subgroup = vk_struct<VkPhysicalDeviceSubgroupProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  auto maintenance3 = vk_struct<VkPhysicalDeviceMaintenance3Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  auto size_control = vk_struct<VkPhysicalDeviceSubgroupSizeControlProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES);
  auto maintenance4 = vk_struct<VkPhysicalDeviceMaintenance4Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES);
  properties.pNext = &subgroup;
  subgroup.pNext = &maintenance3;
  const bool is_1_3 = base.apiVersion >= VK_API_VERSION_1_3;
  const bool sizes = is_1_3 || has_extension(device, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  // The structures exist only where the device knows them.
  if (sizes) maintenance3.pNext = &size_control;
  if (is_1_3) size_control.pNext = &maintenance4;
  vkGetPhysicalDeviceProperties2(device, &properties);

  q.info.subgroup_size = subgroup.subgroupSize;
  q.info.min_subgroup_size = sizes ? size_control.minSubgroupSize : subgroup.subgroupSize;
  q.info.max_subgroup_size = sizes ? size_control.maxSubgroupSize : subgroup.subgroupSize;
  q.limits.max_allocation_bytes = maintenance3.maxMemoryAllocationSize;
  if (is_1_3) q.limits.max_buffer_bytes = maintenance4.maxBufferSize;
  return q;
}

// A queue family that computes; one without graphics first, as such a
// family is the dedicated compute engine where a GPU has one.
std::optional<uint32_t> compute_queue_family(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  std::optional<uint32_t> any;
  for (uint32_t i = 0; i < count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if (!(flags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0) continue;
    if (!(flags & VK_QUEUE_GRAPHICS_BIT)) return i;
    if (!any) any = i;
  }
  return any;
}

Device create_device(VkPhysicalDevice physical, uint32_t family) {
  const float priority = 1.0f;
  auto queue = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queue.queueFamilyIndex = family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  // No optional feature: the shaders use 32-bit storage only.
  auto info = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  VkDevice device = VK_NULL_HANDLE;
  check(vkCreateDevice(physical, &info, nullptr, &device), "vkCreateDevice");
  return Device(device);
}

}  // namespace

std::string api_version_string(uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

std::string describe(const VulkanDeviceInfo& info) {
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB",
                static_cast<double>(info.device_local_bytes) / (1024.0 * 1024.0 * 1024.0));
  std::string subgroup = std::to_string(info.subgroup_size);
  if (info.min_subgroup_size != info.max_subgroup_size) {
    subgroup += " (" + std::to_string(info.min_subgroup_size) + "-" +
                std::to_string(info.max_subgroup_size) + ")";
  }
  return info.name + " (" + info.type + ", subgroup " + subgroup + ", " + memory + ", Vulkan " +
         api_version_string(info.api_version) + ")";
}

std::vector<VulkanDeviceInfo> list_vulkan_devices() {
  const std::optional<Instance> instance = create_instance();
  if (!instance) return {};
  std::vector<VulkanDeviceInfo> infos;
  const std::vector<VkPhysicalDevice> devices = physical_devices(instance->get());
  for (uint32_t i = 0; i < devices.size(); ++i) infos.push_back(query(devices[i], i).info);
  return infos;
}

VulkanDevice::VulkanDevice(uint32_t index) {
  std::optional<Instance> instance = create_instance();
  if (!instance) throw Error("vulkan: no Vulkan driver found (no ICD installed)");
  instance_ = std::move(*instance);
  const std::vector<VkPhysicalDevice> devices = physical_devices(instance_.get());
  if (index >= devices.size()) {
    throw Error("vulkan: no device " + std::to_string(index) + " (" +
                std::to_string(devices.size()) + " found)");
  }
  physical_ = devices[index];
  Queried q = query(physical_, index);
  info_ = std::move(q.info);
  limits_ = q.limits;
  memory_ = q.memory;
  if (info_.api_version < VK_API_VERSION_1_2) {
    throw Error("vulkan: device " + std::to_string(index) + " (" + info_.name +
                ") supports Vulkan " + api_version_string(info_.api_version) +
                "; the backend needs 1.2");
  }
  const std::optional<uint32_t> family = compute_queue_family(physical_);
  if (!family) throw Error("vulkan: device " + info_.name + " has no compute queue");
  queue_family_ = *family;
  device_ = create_device(physical_, queue_family_);
  vkGetDeviceQueue(device_.get(), queue_family_, 0, &queue_);

  auto pool = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pool.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;  // one short-lived buffer per batch
  pool.queueFamilyIndex = queue_family_;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  check(vkCreateCommandPool(device_.get(), &pool, nullptr, &command_pool), "vkCreateCommandPool");
  pool_ = CommandPool(device_.get(), command_pool);

  auto fence = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  VkFence handle = VK_NULL_HANDLE;
  check(vkCreateFence(device_.get(), &fence, nullptr, &handle), "vkCreateFence");
  fence_ = Fence(device_.get(), handle);
  pipelines_ = std::make_unique<PipelineCache>(device_.get());
}

VulkanDevice::~VulkanDevice() {
  // Nothing may still run when the objects go; a failure here (a lost
  // device) leaves nothing to wait for, and a destructor cannot throw.
  if (device_.get() != VK_NULL_HANDLE) (void)vkDeviceWaitIdle(device_.get());
}

void VulkanDevice::submit_and_wait(VkCommandBuffer commands) {
  const VkFence fence = fence_.get();
  check(vkResetFences(device_.get(), 1, &fence), "vkResetFences");
  auto submit = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  check(vkQueueSubmit(queue_, 1, &submit, fence), "vkQueueSubmit");
  check(vkWaitForFences(device_.get(), 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

}  // namespace cortiq::vulkan
