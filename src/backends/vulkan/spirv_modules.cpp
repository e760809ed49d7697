#include "backends/vulkan/spirv_modules.hpp"

#include <string>

#include "base/error.hpp"
#include "base/fault_injection.hpp"

namespace cortiq::vulkan {

std::span<const uint32_t> spirv_module(std::string_view name) {
  // A dozen modules, looked up once per pipeline: a linear search will do.
  for (const SpirvModule& module : spirv_modules()) {
    if (module.name == name && !fault::due(fault::Site::shader)) return module.words;
  }
  throw Error("vulkan: no embedded shader named '" + std::string(name) + "'");
}

}  // namespace cortiq::vulkan
