// The Vulkan backend on the op layer (backends/backend.hpp): a pass's ops
// recorded into one command batch on the device, submitted when the host
// needs a result (copy_to_host: the logits, at the end of a pass).
//
// Tensors are regions of the backend's buffers (one per scratch slot, grown
// as a pass needs). Weights are uploaded the first time an op names them,
// in the file's block layout (VulkanMatrix), and so are the small vectors
// (norm weights, biases); both stay for the backend's life, found again by
// the address of their host bytes. Host rows enter through an upload arena
// the batch copies from.
//
// Every op of the interface runs on the device: get_rows gathers the rows
// on the host, then copies them up. Not yet there (refused with a
// cortiq::Error that names it): norms with a weight row per head, ALiBi,
// an f16 KV cache.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/backend.hpp"
#include "backends/vulkan/vulkan_ops.hpp"
#include "kv/kv_row_storage.hpp"

namespace cortiq::vulkan {

class CommandBatch;
class VulkanBuffer;
class VulkanDevice;
class VulkanKvRows;
class VulkanMatrix;

class VulkanBackend final : public Backend {
 public:
  // The device must outlive the backend; host work runs on `pool`.
  VulkanBackend(VulkanDevice& device, ThreadPool& pool);
  ~VulkanBackend() override;
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;

  std::string_view name() const override { return "vulkan"; }
  ThreadPool& host_pool() const override { return pool_; }

  Tensor scratch(std::vector<float>& slot, size_t n) override;
  void copy_from_host(std::span<const float> src, Tensor dst) override;
  void copy_to_host(ConstTensor src, std::span<float> dst) override;
  void abandon_pass() override;
  void gather_rows(ConstTensor src, std::span<const int32_t> rows, Tensor dst,
                   size_t width) override;
  void scatter_rows(ConstTensor src, Tensor dst, std::span<const int32_t> rows,
                    size_t width) override;
  void copy_rows(ConstTensor src, size_t src_stride, Tensor dst, size_t dst_stride, size_t width,
                 size_t n_rows) override;
  Tensor output_tensor(std::span<float> host, std::vector<float>& slot) override;

  void matmul(const kernels::WeightView& w, ConstTensor x, int64_t n_rows, Tensor y,
              int64_t y_stride) override;
  void matmul_shared_input(std::span<const MatmulProduct> products, ConstTensor x,
                           int64_t n_rows) override;
  void matmul_each_input(std::span<const MatmulProduct> products,
                         std::span<const ConstTensor> inputs) override;
  void get_rows(const kernels::WeightView& table, std::span<const int32_t> ids,
                Tensor out) override;

  void rms_norm_rows(ConstTensor x, std::span<const float> weight, float eps, Tensor out,
                     size_t width) override;
  void layer_norm_rows(ConstTensor x, std::span<const float> weight, std::span<const float> bias,
                       float eps, Tensor out, size_t width) override;

  void add(Tensor x, ConstTensor b) override;
  void add_bias_rows(Tensor rows, std::span<const float> bias) override;
  void divide_rows(Tensor rows, std::span<const float> divisor) override;
  void scale(Tensor x, float s) override;
  void scale_rows(Tensor x, ConstTensor factors, size_t width) override;
  void sum_row_groups(ConstTensor x, size_t group, Tensor out, size_t width) override;
  void clamp(Tensor x, float lo, float hi) override;
  void softcap(Tensor x, float cap) override;
  void unary(UnaryOp op, Tensor x) override;
  void xielu(Tensor x, const kernels::XieluParams& params) override;
  void glu(GluOp op, ConstTensor gate, ConstTensor up, Tensor out) override;
  void glu_halves(GluOp op, ConstTensor both, Tensor out, size_t width) override;

  void rope_rows(Tensor x, size_t n_rows, int64_t n_heads, int64_t head_dim,
                 const kernels::RopeParams& params, std::span<const float> table) override;

  void store_kv(KvCache& cache, int64_t layer, std::span<const int32_t> cells, ConstTensor k,
                ConstTensor v, size_t k_width, size_t v_width) override;
  void attention(const AttentionOp& op, const KvCache& cache, ConstTensor q, Tensor out) override;

  // Runs what is recorded and waits (copy_to_host does it itself).
  void finish();
  // The storage for a KvCache whose rows this backend's attention reads.
  KvRowStorage::Factory kv_rows() const;

 private:
  CommandBatch& batch();
  // The buffer a device tensor lives in; throws for host memory or a
  // region this backend did not make.
  VulkanBuffer& buffer_of(ConstTensor t, std::string_view op) const;
  // A new buffer of at least `floats` floats; its index.
  uint32_t add_buffer(size_t floats);
  const VulkanMatrix& matrix_of(const kernels::WeightView& w);
  // The small host vector's device copy (uploaded on first use).
  VulkanBuffer& constant_of(std::span<const float> values);
  // ALiBi's per-head slopes (kernels::alibi_slope), kept so constant_of
  // finds them again.
  std::span<const float> alibi_slopes(float max_bias, int64_t n_head);
  // GELU's table as floats (kernels::gelu_fp16_table), uploaded once.
  VulkanBuffer& gelu_table();
  void elementwise(ElementOp op, Tensor out, ConstTensor x, const VulkanBuffer* b,
                   uint64_t b_offset, uint32_t width, float p0, float p1, std::string_view name);
  [[noreturn]] static void not_yet(std::string_view op);
  void store_kv_f16(const KvCache& cache, const VulkanKvRows& storage, int64_t layer,
                    std::span<const int32_t> cells, KvSide side, ConstTensor rows, size_t width);
  template <class RowOffsets>
  void copy_row_list(ConstTensor src, Tensor dst, size_t n, size_t width, std::string_view op,
                     RowOffsets at);
  // Host bytes into `dst` at dst_offset bytes, through the upload arena.
  void stage(std::span<const std::byte> bytes, const VulkanBuffer& dst, uint64_t dst_offset);

  VulkanDevice& device_;
  ThreadPool& pool_;
  std::unique_ptr<CommandBatch> batch_;
  std::vector<std::unique_ptr<VulkanBuffer>> buffers_;  // a tensor's region.buffer indexes it
  std::unordered_map<const void*, uint32_t> slots_;     // scratch slot -> buffer index
  std::unordered_map<const void*, std::unique_ptr<VulkanMatrix>> matrices_;
  std::unordered_map<const void*, std::unique_ptr<VulkanBuffer>> constants_;
  // Host rows on their way up; grown (the old arena kept) within a batch.
  std::unique_ptr<VulkanBuffer> arena_;
  size_t arena_used_ = 0;
  std::vector<std::unique_ptr<VulkanBuffer>> retired_;  // kept until the batch ran
  std::unique_ptr<VulkanBuffer> readback_;
  std::vector<float> host_rows_;  // get_rows' gathered rows
  // Slots of the backend's own: RoPE tables, attention's row tables and scores.
  std::vector<float> rope_table_slot_, attention_rows_slot_, scores_slot_;
  std::vector<uint32_t> attention_rows_;
  std::vector<float> kv_store_rows_slot_;  // store_kv_f16's word offsets, on the device
  std::vector<uint32_t> kv_store_rows_;
  std::vector<VkBufferCopy> copy_regions_;  // copy_rows's, kept between calls
  std::map<std::pair<float, int64_t>, std::vector<float>> alibi_slopes_;
  std::vector<float> gelu_values_;
  // attention's per-call maps, kept so a warm pass allocates no buckets:
  // each sequence's end and its first entry in attention_rows_.
  std::unordered_map<int32_t, int64_t> attention_seq_end_;
  std::unordered_map<int32_t, uint32_t> attention_seq_table_;
};

}  // namespace cortiq::vulkan
