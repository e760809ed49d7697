// Vulkan results turned into cortiq errors: every call that returns a
// VkResult goes through check(), so a failure names the call and the result
// ("vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY").
#pragma once

#include <vulkan/vulkan.h>

#include <string_view>

#include "base/error.hpp"

namespace cortiq::vulkan {

// The device stopped answering (a hang, a driver reset, a removed GPU):
// nothing recorded on it can complete and it must be opened again. A type of
// its own so that callers can tell it from a refused request.
class DeviceLost : public Error {
 public:
  using Error::Error;
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY"; "VkResult(unknown)" for a value not listed
// (check() then adds the number).
std::string_view vk_result_name(VkResult result);

// Throws Error ("WHAT: RESULT"), or DeviceLost for VK_ERROR_DEVICE_LOST,
// unless result is VK_SUCCESS. Other non-error codes (VK_INCOMPLETE,
// VK_TIMEOUT, ...) are refused too: callers that expect one test for it
// before calling check.
void check(VkResult result, std::string_view what);

}  // namespace cortiq::vulkan
