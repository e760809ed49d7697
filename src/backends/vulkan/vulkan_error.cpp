#include "backends/vulkan/vulkan_error.hpp"

#include <string>

namespace cortiq::vulkan {

std::string_view vk_result_name(VkResult result) {
  switch (result) {
#define CORTIQ_VK_RESULT(name) \
  case name:                   \
    return #name;
    CORTIQ_VK_RESULT(VK_SUCCESS)
    CORTIQ_VK_RESULT(VK_NOT_READY)
    CORTIQ_VK_RESULT(VK_TIMEOUT)
    CORTIQ_VK_RESULT(VK_EVENT_SET)
    CORTIQ_VK_RESULT(VK_EVENT_RESET)
    CORTIQ_VK_RESULT(VK_INCOMPLETE)
    CORTIQ_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    CORTIQ_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CORTIQ_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    CORTIQ_VK_RESULT(VK_ERROR_DEVICE_LOST)
    CORTIQ_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    CORTIQ_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    CORTIQ_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    CORTIQ_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    CORTIQ_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    CORTIQ_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    CORTIQ_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    CORTIQ_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    CORTIQ_VK_RESULT(VK_ERROR_UNKNOWN)
    CORTIQ_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    CORTIQ_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    CORTIQ_VK_RESULT(VK_ERROR_FRAGMENTATION)
    CORTIQ_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    CORTIQ_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef CORTIQ_VK_RESULT
    default:
      break;
  }
  return "VkResult(unknown)";
}

void check(VkResult result, std::string_view what) {
  if (result == VK_SUCCESS) return;
  std::string message = std::string(what) + ": " + std::string(vk_result_name(result));
  if (result == VK_ERROR_DEVICE_LOST) {
    throw DeviceLost(message + " (the device was lost; open it again)");
  }
  if (vk_result_name(result) == "VkResult(unknown)") {
    message += " (" + std::to_string(static_cast<int>(result)) + ")";
  }
  throw Error(message);
}

}  // namespace cortiq::vulkan
