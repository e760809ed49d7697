// A weight matrix on the device, in its file's block layout: row r is
// ggml_row_bytes(type, n_cols) contiguous bytes, as GGUF stores it, uploaded
// once into device-local memory and read by the matmul shaders as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/vulkan/vulkan_buffer.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::vulkan {

// The weight types the matmul shaders decode.
bool vulkan_matmul_supports(GgmlType type);

class VulkanMatrix {
 public:
  // Throws cortiq::Error for a type the shaders do not decode, n_cols that
  // is not a whole number of blocks, or `bytes` of another size than
  // n_rows rows.
  VulkanMatrix(VulkanDevice& device, GgmlType type, int64_t n_rows, int64_t n_cols,
               std::span<const std::byte> bytes,
               HostAccess access = HostAccess::mapped_when_possible);

  GgmlType type() const { return type_; }
  int64_t n_rows() const { return n_rows_; }
  int64_t n_cols() const { return n_cols_; }
  uint64_t row_bytes() const { return row_bytes_; }
  const VulkanBuffer& buffer() const { return buffer_; }

 private:
  GgmlType type_;
  int64_t n_rows_;
  int64_t n_cols_;
  uint64_t row_bytes_;
  VulkanBuffer buffer_;
};

}  // namespace cortiq::vulkan
