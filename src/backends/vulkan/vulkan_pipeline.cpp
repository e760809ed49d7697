#include "backends/vulkan/vulkan_pipeline.hpp"

#include <array>

#include "backends/vulkan/spirv_modules.hpp"
#include "backends/vulkan/vulkan_error.hpp"

namespace cortiq::vulkan {
namespace {

void check_spec(const PipelineSpec& spec) {
  const std::string name(spec.shader);
  if (spec.n_buffers == 0 || spec.n_buffers > kMaxPipelineBuffers) {
    throw Error("vulkan: pipeline " + name + ": " + std::to_string(spec.n_buffers) +
                " buffers (1 to " + std::to_string(kMaxPipelineBuffers) + " allowed)");
  }
  if (spec.push_bytes % 4 != 0 || spec.push_bytes > 128) {
    // 128 bytes: the least maxPushConstantsSize a device may have.
    throw Error("vulkan: pipeline " + name + ": push block of " + std::to_string(spec.push_bytes) +
                " bytes (a multiple of 4, at most 128)");
  }
  if (spec.written >> spec.n_buffers) {
    throw Error("vulkan: pipeline " + name + ": writes a binding it does not have");
  }
}

DescriptorSetLayout make_set_layout(VkDevice device, uint32_t n_buffers) {
  std::array<VkDescriptorSetLayoutBinding, kMaxPipelineBuffers> bindings{};
  for (uint32_t i = 0; i < n_buffers; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  auto info = vk_struct<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  info.bindingCount = n_buffers;
  info.pBindings = bindings.data();
  VkDescriptorSetLayout layout = VK_NULL_HANDLE;
  check(vkCreateDescriptorSetLayout(device, &info, nullptr, &layout),
        "vkCreateDescriptorSetLayout");
  return DescriptorSetLayout(device, layout);
}

PipelineLayout make_layout(VkDevice device, VkDescriptorSetLayout set_layout, uint32_t push_bytes) {
  const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  auto info = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  info.setLayoutCount = 1;
  info.pSetLayouts = &set_layout;
  info.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
  info.pPushConstantRanges = &push;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  check(vkCreatePipelineLayout(device, &info, nullptr, &layout), "vkCreatePipelineLayout");
  return PipelineLayout(device, layout);
}

ShaderModule make_module(VkDevice device, std::string_view name) {
  const std::span<const uint32_t> words = spirv_module(name);
  auto info = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  info.codeSize = words.size_bytes();
  info.pCode = words.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(device, &info, nullptr, &module),
        "vkCreateShaderModule (" + std::string(name) + ")");
  return ShaderModule(device, module);
}

}  // namespace

ComputePipeline::ComputePipeline(VkDevice device, const PipelineSpec& spec)
    : shader_(spec.shader), spec_(spec) {
  spec_.shader = shader_;
  check_spec(spec_);
  set_layout_ = make_set_layout(device, spec_.n_buffers);
  layout_ = make_layout(device, set_layout_.get(), spec_.push_bytes);
  // The module is needed only while the pipeline is built.
  const ShaderModule module = make_module(device, shader_);
  auto info =
      vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module.get();
  info.stage.pName = "main";
  info.layout = layout_.get();
  VkPipeline pipeline = VK_NULL_HANDLE;
  check(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline),
        "vkCreateComputePipelines (" + shader_ + ")");
  pipeline_ = Pipeline(device, pipeline);
}

const ComputePipeline& PipelineCache::get(const PipelineSpec& spec) {
  const auto it = pipelines_.find(spec.shader);
  if (it != pipelines_.end()) {
    if (!(it->second->spec() == spec)) {
      throw Error("vulkan: pipeline " + std::string(spec.shader) +
                  " asked for with another interface than it was built with");
    }
    return *it->second;
  }
  auto pipeline = std::make_unique<ComputePipeline>(device_, spec);
  const ComputePipeline& built = *pipeline;
  pipelines_.emplace(std::string(spec.shader), std::move(pipeline));
  return built;
}

}  // namespace cortiq::vulkan
