// The Vulkan device the tests share, opened on first use (each test's
// pipelines are then built once per process), and the macro that skips a
// test with a message where the loader finds none.
#pragma once

#if CORTIQ_HAVE_VULKAN

#include <gtest/gtest.h>

#include <memory>

#include "backends/vulkan/vulkan_device.hpp"

namespace cortiq::vulkan {

// Null when the loader finds no device.
inline VulkanDevice* shared_test_device() {
  static const std::unique_ptr<VulkanDevice> device = []() -> std::unique_ptr<VulkanDevice> {
    if (list_vulkan_devices().empty()) return nullptr;
    return std::make_unique<VulkanDevice>(0);
  }();
  return device.get();
}

}  // namespace cortiq::vulkan

#define REQUIRE_VULKAN_DEVICE(name)                                                    \
  ::cortiq::vulkan::VulkanDevice* name##_ptr = ::cortiq::vulkan::shared_test_device(); \
  if (name##_ptr == nullptr)                                                           \
    GTEST_SKIP() << "no Vulkan device found (for the software one: apt-get install "   \
                    "mesa-vulkan-drivers)";                                            \
  ::cortiq::vulkan::VulkanDevice& name = *name##_ptr

#endif  // CORTIQ_HAVE_VULKAN
