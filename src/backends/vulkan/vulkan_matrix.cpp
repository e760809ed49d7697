#include "backends/vulkan/vulkan_matrix.hpp"

#include <string>

#include "base/error.hpp"

namespace cortiq::vulkan {
namespace {

// The row size, checked before any device memory is asked for.
uint64_t checked_row_bytes(GgmlType type, int64_t n_rows, int64_t n_cols,
                           std::span<const std::byte> bytes) {
  const std::string what = "vulkan: a " + std::string(ggml_type_name(type)) + " matrix of " +
                           std::to_string(n_rows) + " x " + std::to_string(n_cols);
  if (!vulkan_matmul_supports(type)) throw Error(what + ": the Vulkan matmul has no such type");
  if (n_rows <= 0 || n_cols <= 0) throw Error(what + ": empty");
  const auto row = ggml_row_bytes(type, static_cast<uint64_t>(n_cols));
  if (!row) throw Error(what + ": the columns are not a whole number of blocks");
  if (bytes.size() / *row != static_cast<uint64_t>(n_rows) || bytes.size() % *row != 0) {
    throw Error(what + ": " + std::to_string(bytes.size()) + " bytes given, " +
                std::to_string(*row * static_cast<uint64_t>(n_rows)) + " expected");
  }
  return *row;
}

}  // namespace

bool vulkan_matmul_supports(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::BF16:
    case GgmlType::IQ4_NL:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::IQ4_XS:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

VulkanMatrix::VulkanMatrix(VulkanDevice& device, GgmlType type, int64_t n_rows, int64_t n_cols,
                           std::span<const std::byte> bytes, HostAccess access)
    : type_(type),
      n_rows_(n_rows),
      n_cols_(n_cols),
      row_bytes_(checked_row_bytes(type, n_rows, n_cols, bytes)),
      buffer_(device, bytes.size(), MemoryKind::device_local, access) {
  buffer_.upload(bytes);
}

}  // namespace cortiq::vulkan
