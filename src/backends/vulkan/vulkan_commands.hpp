// One command buffer of work: dispatches and copies recorded in order, then
// submitted once and waited on. This is the normal path ("one command buffer
// per forward"): ops record into a batch, nothing runs until submit.
//
// The batch inserts the pipeline barriers itself: it remembers which
// buffers the commands since the last barrier read and wrote, and puts a
// barrier before a command that reads or writes what an earlier one wrote,
// or writes what an earlier one read. Independent commands are left free to
// overlap.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/vulkan/vulkan_handle.hpp"

namespace cortiq::vulkan {

class ComputePipeline;
class VulkanBuffer;
class VulkanDevice;

class CommandBatch {
 public:
  explicit CommandBatch(VulkanDevice& device);
  ~CommandBatch();
  CommandBatch(const CommandBatch&) = delete;
  CommandBatch& operator=(const CommandBatch&) = delete;

  VulkanDevice& device() const { return *device_; }

  // Records one dispatch of `groups` workgroups with `buffers` at bindings
  // 0..n-1 and `push` as the push constants (sizes as the pipeline's spec
  // says). The buffers are not owned: they must outlive submit_and_wait().
  void dispatch(const ComputePipeline& pipeline, std::span<const VulkanBuffer* const> buffers,
                std::span<const std::byte> push, std::array<uint32_t, 3> groups);

  // Records a copy of `bytes` bytes between two buffers.
  void copy(const VulkanBuffer& from, uint64_t from_offset, const VulkanBuffer& to,
            uint64_t to_offset, uint64_t bytes);
  // Records copies of several regions between two buffers in one command
  // (regions that do not overlap).
  void copy_regions(const VulkanBuffer& from, const VulkanBuffer& to,
                    std::span<const VkBufferCopy> regions);

  // Ends the command buffer, submits it and waits until it has run; the
  // results are then visible to the host. Once only.
  void submit_and_wait();

  uint32_t recorded() const { return recorded_; }
  uint32_t barriers() const { return barriers_; }

 private:
  struct Access {
    VkBuffer buffer;
    bool writes;
  };
  // Barrier first when `accesses` conflict with what ran since the last one.
  void order_after_earlier(std::span<const Access> accesses);
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);
  void check_recording() const;

  VulkanDevice* device_;
  VkCommandBuffer command_buffer_ = VK_NULL_HANDLE;
  std::vector<DescriptorPool> pools_;
  uint32_t sets_in_last_pool_ = 0;
  std::vector<VkBuffer> read_since_barrier_;
  std::vector<VkBuffer> written_since_barrier_;
  bool written_any_ = false;
  bool submitted_ = false;
  uint32_t recorded_ = 0;
  uint32_t barriers_ = 0;
};

}  // namespace cortiq::vulkan
