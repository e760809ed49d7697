// The Vulkan backend (src/backends/vulkan) on whatever device the loader
// finds: in CI, Mesa's software device (lavapipe).
#include <gtest/gtest.h>

#if CORTIQ_HAVE_VULKAN

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_buffer.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#include "backends/vulkan/vulkan_error.hpp"
#include "base/error.hpp"
#include "test_support.hpp"

namespace cortiq::vulkan {
namespace {

// One device for the suite, opened on first use: each test's pipelines are
// then built once. Null when the loader finds no device.
VulkanDevice* shared_device() {
  static const std::unique_ptr<VulkanDevice> device = []() -> std::unique_ptr<VulkanDevice> {
    if (list_vulkan_devices().empty()) return nullptr;
    return std::make_unique<VulkanDevice>(0);
  }();
  return device.get();
}

#define REQUIRE_VULKAN_DEVICE(name)                                                  \
  VulkanDevice* name##_ptr = shared_device();                                        \
  if (name##_ptr == nullptr)                                                         \
    GTEST_SKIP() << "no Vulkan device found (for the software one: apt-get install " \
                    "mesa-vulkan-drivers)";                                          \
  VulkanDevice& name = *name##_ptr

TEST(VulkanError, NamesTheCallAndTheResult) {
  EXPECT_NO_THROW(check(VK_SUCCESS, "vkCreateBuffer"));
  try {
    check(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY");
  }
  try {
    check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
    FAIL() << "no exception";
  } catch (const DeviceLost& e) {
    EXPECT_NE(std::string(e.what()).find("vkQueueSubmit: VK_ERROR_DEVICE_LOST"), std::string::npos);
  }
  EXPECT_THROW(check(static_cast<VkResult>(-12345), "vkX"), Error);
}

TEST(VulkanDevice, EveryDeviceListsAndOpens) {
  const std::vector<VulkanDeviceInfo> devices = list_vulkan_devices();
  if (devices.empty()) GTEST_SKIP() << "no Vulkan device found";
  for (const VulkanDeviceInfo& info : devices) {
    std::printf("vulkan device %u: %s\n", info.index, describe(info).c_str());
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.subgroup_size, 0u);
    EXPECT_LE(info.min_subgroup_size, info.subgroup_size);
    EXPECT_GE(info.max_subgroup_size, info.subgroup_size);
    if (info.api_version < VK_API_VERSION_1_2) {
      EXPECT_THROW(VulkanDevice{info.index}, Error) << info.name;
      continue;
    }
    const VulkanDevice device(info.index);
    EXPECT_EQ(device.info().name, info.name);
    EXPECT_GT(device.limits().max_storage_buffer_range, 0u);
  }
  EXPECT_THROW(VulkanDevice{static_cast<uint32_t>(devices.size())}, Error);
}

// Both ways in and out: through the mapping where the memory has one, and
// through a staging buffer (the path of a discrete GPU).
TEST(VulkanBuffer, UploadsAndDownloadsEveryWay) {
  REQUIRE_VULKAN_DEVICE(device);
  std::vector<std::byte> bytes(1001);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  for (const MemoryKind kind : {MemoryKind::device_local, MemoryKind::host_visible}) {
    for (const HostAccess access : {HostAccess::mapped_when_possible, HostAccess::staging_only}) {
      VulkanBuffer buffer(device, bytes.size(), kind, access);
      buffer.upload(bytes);
      std::vector<std::byte> back(bytes.size());
      buffer.download(back);
      EXPECT_EQ(back, bytes);
      // A part at an odd offset.
      buffer.upload(std::span(bytes).first(10), 333);
      std::vector<std::byte> part(10);
      buffer.download(part, 333);
      EXPECT_EQ(part, std::vector<std::byte>(bytes.begin(), bytes.begin() + 10));
      EXPECT_THROW(buffer.upload(bytes, 1), Error);
    }
  }
}

TEST(VulkanBuffer, AllocationBeyondTheDeviceIsAnError) {
  REQUIRE_VULKAN_DEVICE(device);
  const uint64_t huge = uint64_t{1} << 50;
  try {
    VulkanBuffer buffer(device, huge);
    FAIL() << "a 1 PiB buffer was allocated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
  }
  // Twice the device's memory passes the size limits on some devices and
  // must then fail at the heap check or in vkAllocateMemory, still an Error.
  const uint64_t twice = 2 * device.info().device_local_bytes + 4096;
  EXPECT_THROW((VulkanBuffer{device, twice}), Error);
  EXPECT_THROW((VulkanBuffer{device, 0}), Error);
  // The device is still usable afterwards.
  VulkanBuffer small(device, 16);
  small.upload(std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(small.download_floats(), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace cortiq::vulkan

#else  // !CORTIQ_HAVE_VULKAN

TEST(VulkanBackend, NotBuilt) {
  GTEST_SKIP() << "built without the Vulkan backend";
}

#endif
