#include "backends/vulkan/vulkan_commands.hpp"

#include <algorithm>
#include <string>

#include "backends/vulkan/vulkan_buffer.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#include "backends/vulkan/vulkan_error.hpp"
#include "backends/vulkan/vulkan_pipeline.hpp"
#include "base/fault_injection.hpp"

namespace cortiq::vulkan {
namespace {

// Descriptor sets per pool; each set has at most kMaxPipelineBuffers
// buffers, so a pool never runs out before its count does.
constexpr uint32_t kSetsPerPool = 64;

constexpr VkPipelineStageFlags kWorkStages =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

bool contains(const std::vector<VkBuffer>& buffers, VkBuffer buffer) {
  return std::find(buffers.begin(), buffers.end(), buffer) != buffers.end();
}

DescriptorPool make_pool(VkDevice device) {
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  kSetsPerPool * kMaxPipelineBuffers};
  auto info = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  info.maxSets = kSetsPerPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(vkCreateDescriptorPool(device, &info, nullptr, &pool), "vkCreateDescriptorPool");
  return DescriptorPool(device, pool);
}

// Every write by compute or transfer before it, visible to every read and
// write by compute or transfer after it. One global memory barrier: drivers
// treat buffer barriers no better.
void record_barrier(VkCommandBuffer commands) {
  auto barrier = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(commands, kWorkStages, kWorkStages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

CommandBatch::CommandBatch(VulkanDevice& device) : device_(&device) {
  auto info =
      vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  info.commandPool = device.command_pool();
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device.handle(), &info, &command_buffer_),
        "vkAllocateCommandBuffers");
  auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  const VkResult result = vkBeginCommandBuffer(command_buffer_, &begin);
  if (result != VK_SUCCESS) {
    vkFreeCommandBuffers(device.handle(), device.command_pool(), 1, &command_buffer_);
    check(result, "vkBeginCommandBuffer");
  }
}

CommandBatch::~CommandBatch() {
  // submit_and_wait() has waited, or nothing was submitted: the buffer is
  // not in use. Its descriptor sets go with their pools.
  vkFreeCommandBuffers(device_->handle(), device_->command_pool(), 1, &command_buffer_);
}

void CommandBatch::check_recording() const {
  if (submitted_) throw Error("vulkan: a command batch was used after its submission");
}

void CommandBatch::order_after_earlier(std::span<const Access> accesses) {
  const bool conflict = std::any_of(accesses.begin(), accesses.end(), [&](const Access& a) {
    return contains(written_since_barrier_, a.buffer) ||
           (a.writes && contains(read_since_barrier_, a.buffer));
  });
  if (conflict) {
    record_barrier(command_buffer_);
    ++barriers_;
    read_since_barrier_.clear();
    written_since_barrier_.clear();
  }
  for (const Access& a : accesses) {
    (a.writes ? written_since_barrier_ : read_since_barrier_).push_back(a.buffer);
    written_any_ = written_any_ || a.writes;
  }
}

VkDescriptorSet CommandBatch::allocate_set(VkDescriptorSetLayout layout) {
  if (pools_.empty() || sets_in_last_pool_ == kSetsPerPool) {
    pools_.push_back(make_pool(device_->handle()));
    sets_in_last_pool_ = 0;
  }
  auto info =
      vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  info.descriptorPool = pools_.back().get();
  info.descriptorSetCount = 1;
  info.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(vkAllocateDescriptorSets(device_->handle(), &info, &set), "vkAllocateDescriptorSets");
  ++sets_in_last_pool_;
  return set;
}

void CommandBatch::dispatch(const ComputePipeline& pipeline,
                            std::span<const VulkanBuffer* const> buffers,
                            std::span<const std::byte> push, std::array<uint32_t, 3> groups) {
  check_recording();
  const PipelineSpec& spec = pipeline.spec();
  const std::string name(spec.shader);
  if (buffers.size() != spec.n_buffers || push.size() != spec.push_bytes) {
    throw Error("vulkan: dispatch of " + name + " with " + std::to_string(buffers.size()) +
                " buffers and " + std::to_string(push.size()) + " push bytes (it takes " +
                std::to_string(spec.n_buffers) + " and " + std::to_string(spec.push_bytes) + ")");
  }
  const VulkanLimits& limits = device_->limits();
  for (uint32_t i = 0; i < 3; ++i) {
    if (groups[i] == 0 || groups[i] > limits.max_workgroups[i]) {
      throw Error("vulkan: dispatch of " + name + ": " + std::to_string(groups[i]) +
                  " workgroups in dimension " + std::to_string(i) + " (the device allows 1 to " +
                  std::to_string(limits.max_workgroups[i]) + ")");
    }
  }

  std::array<VkDescriptorBufferInfo, kMaxPipelineBuffers> infos{};
  std::array<VkWriteDescriptorSet, kMaxPipelineBuffers> writes{};
  std::array<Access, kMaxPipelineBuffers> accesses{};
  const VkDescriptorSet set = allocate_set(pipeline.set_layout());
  for (uint32_t i = 0; i < spec.n_buffers; ++i) {
    const VulkanBuffer& buffer = *buffers[i];
    // The whole buffer is bound: it must fit one binding's range.
    if (buffer.size() > limits.max_storage_buffer_range) {
      throw Error("vulkan: dispatch of " + name + ": a buffer of " + std::to_string(buffer.size()) +
                  " bytes exceeds the device's storage buffer range (" +
                  std::to_string(limits.max_storage_buffer_range) + " bytes)");
    }
    infos[i] = {buffer.handle(), 0, VK_WHOLE_SIZE};
    writes[i] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    accesses[i] = {buffer.handle(), pipeline.writes(i)};
  }
  vkUpdateDescriptorSets(device_->handle(), spec.n_buffers, writes.data(), 0, nullptr);

  order_after_earlier(std::span(accesses).first(spec.n_buffers));
  vkCmdBindPipeline(command_buffer_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vkCmdBindDescriptorSets(command_buffer_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1,
                          &set, 0, nullptr);
  if (!push.empty()) {
    vkCmdPushConstants(command_buffer_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(push.size()), push.data());
  }
  vkCmdDispatch(command_buffer_, groups[0], groups[1], groups[2]);
  ++recorded_;
}

void CommandBatch::copy(const VulkanBuffer& from, uint64_t from_offset, const VulkanBuffer& to,
                        uint64_t to_offset, uint64_t bytes) {
  check_recording();
  if (from_offset > from.size() || bytes > from.size() - from_offset || to_offset > to.size() ||
      bytes > to.size() - to_offset || bytes == 0) {
    throw Error("vulkan: a copy of " + std::to_string(bytes) + " bytes outside its buffers");
  }
  const std::array<Access, 2> accesses{{{from.handle(), false}, {to.handle(), true}}};
  order_after_earlier(accesses);
  const VkBufferCopy region{from_offset, to_offset, bytes};
  vkCmdCopyBuffer(command_buffer_, from.handle(), to.handle(), 1, &region);
  ++recorded_;
}

void CommandBatch::copy_regions(const VulkanBuffer& from, const VulkanBuffer& to,
                                std::span<const VkBufferCopy> regions) {
  check_recording();
  if (regions.empty()) return;
  for (const VkBufferCopy& r : regions) {
    if (r.srcOffset > from.size() || r.size > from.size() - r.srcOffset ||
        r.dstOffset > to.size() || r.size > to.size() - r.dstOffset || r.size == 0) {
      throw Error("vulkan: a copy of " + std::to_string(r.size) + " bytes outside its buffers");
    }
  }
  const std::array<Access, 2> accesses{{{from.handle(), false}, {to.handle(), true}}};
  order_after_earlier(accesses);
  vkCmdCopyBuffer(command_buffer_, from.handle(), to.handle(),
                  static_cast<uint32_t>(regions.size()), regions.data());
  ++recorded_;
}

void CommandBatch::submit_and_wait() {
  check_recording();
  submitted_ = true;
  if (written_any_) {
    // Device writes reach the host only through a barrier to the host stage.
    auto barrier = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(command_buffer_, kWorkStages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier,
                         0, nullptr, 0, nullptr);
  }
  check(vkEndCommandBuffer(command_buffer_), "vkEndCommandBuffer");
  if (fault::due(fault::Site::device_lost)) check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
  device_->submit_and_wait(command_buffer_);
}

}  // namespace cortiq::vulkan
