// Compute pipelines made from the embedded SPIR-V modules (spirv_modules.hpp).
// Every shader of the backend has the same shape: storage buffers at
// bindings 0..n-1 of set 0 and one push-constant block, so a pipeline is
// described by its shader's name, its buffer count and its push size.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "backends/vulkan/vulkan_handle.hpp"

namespace cortiq::vulkan {

inline constexpr uint32_t kMaxPipelineBuffers = 8;

struct PipelineSpec {
  std::string_view shader;  // the module's name: "matmul_q4_0"
  uint32_t n_buffers = 0;   // storage buffers at bindings 0..n_buffers-1
  uint32_t push_bytes = 0;  // size of the push-constant block, a multiple of 4
  uint32_t written = 0;     // bit i set: the shader writes binding i (for barriers)

  bool operator==(const PipelineSpec&) const = default;
};

class ComputePipeline {
 public:
  // Throws cortiq::Error for an unknown shader, a bad spec or a failed build.
  ComputePipeline(VkDevice device, const PipelineSpec& spec);
  // Not movable either: spec_.shader views shader_.
  ComputePipeline(const ComputePipeline&) = delete;
  ComputePipeline& operator=(const ComputePipeline&) = delete;

  const PipelineSpec& spec() const { return spec_; }
  VkPipeline handle() const { return pipeline_.get(); }
  VkPipelineLayout layout() const { return layout_.get(); }
  VkDescriptorSetLayout set_layout() const { return set_layout_.get(); }
  bool writes(uint32_t binding) const { return (spec_.written >> binding) & 1u; }

 private:
  std::string shader_;  // spec_.shader views this
  PipelineSpec spec_;
  DescriptorSetLayout set_layout_;
  PipelineLayout layout_;
  Pipeline pipeline_;
};

// The pipelines of one device by shader name, each built on first use.
class PipelineCache {
 public:
  explicit PipelineCache(VkDevice device) : device_(device) {}

  // Throws cortiq::Error when `spec` differs from the one the shader was
  // first built with: a shader has one interface.
  const ComputePipeline& get(const PipelineSpec& spec);
  size_t size() const { return pipelines_.size(); }

 private:
  VkDevice device_;
  std::map<std::string, std::unique_ptr<ComputePipeline>, std::less<>> pipelines_;
};

}  // namespace cortiq::vulkan
