// The compute shaders (shaders/*.comp), compiled to SPIR-V at build time and
// embedded in the library by cmake/embed_spirv.cmake: nothing is read from
// disk at run time.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace cortiq::vulkan {

struct SpirvModule {
  std::string_view name;  // the shader's file name without .comp
  std::span<const uint32_t> words;
};

// Every embedded module, sorted by name (defined in the generated source).
std::span<const SpirvModule> spirv_modules();

// The module called `name`; throws cortiq::Error for an unknown name.
std::span<const uint32_t> spirv_module(std::string_view name);

}  // namespace cortiq::vulkan
