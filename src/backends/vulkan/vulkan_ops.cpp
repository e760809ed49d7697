#include "backends/vulkan/vulkan_ops.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "backends/vulkan/vulkan_buffer.hpp"
#include "backends/vulkan/vulkan_commands.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#include "backends/vulkan/vulkan_matrix.hpp"
#include "backends/vulkan/vulkan_pipeline.hpp"
#include "base/error.hpp"

namespace cortiq::vulkan {
namespace {

// Tokens per matmul workgroup: TILE in shaders/matmul.glsl.
constexpr int64_t kMatmulTokenTile = 4;

struct MatmulPush {
  uint32_t n_rows;
  uint32_t n_cols;
  uint32_t n_tok;
  uint32_t row_bytes;
};

struct RmsNormPush {
  uint32_t width;
  uint32_t n_rows;
  float eps;
  uint32_t has_weight;
};

std::string_view matmul_shader(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return "matmul_f32";
    case GgmlType::F16:
      return "matmul_f16";
    case GgmlType::Q4_0:
      return "matmul_q4_0";
    case GgmlType::Q4_1:
      return "matmul_q4_1";
    case GgmlType::Q5_0:
      return "matmul_q5_0";
    case GgmlType::Q5_1:
      return "matmul_q5_1";
    case GgmlType::Q8_0:
      return "matmul_q8_0";
    default:
      throw Error("vulkan: matmul has no shader for " + std::string(ggml_type_name(type)));
  }
}

// The shaders index bytes with 32-bit integers.
void check_addressable(const VulkanBuffer& buffer, std::string_view what) {
  if (buffer.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error("vulkan: " + std::string(what) + " of " + std::to_string(buffer.size()) +
                " bytes: the shaders address at most 4 GiB");
  }
}

void check_floats(const VulkanBuffer& buffer, int64_t n, std::string_view what) {
  if (n <= 0 || buffer.size() / sizeof(float) < static_cast<uint64_t>(n)) {
    throw Error("vulkan: " + std::string(what) + " holds " +
                std::to_string(buffer.size() / sizeof(float)) + " floats, " + std::to_string(n) +
                " needed");
  }
  check_addressable(buffer, what);
}

// Workgroups for n_rows rows (x, then y when x's limit is reached) times
// `depth` in z.
std::array<uint32_t, 3> row_grid(const VulkanDevice& device, int64_t n_rows, int64_t depth) {
  const int64_t max_x = device.limits().max_workgroups[0];
  const int64_t x = std::min(n_rows, max_x);
  const int64_t y = (n_rows + x - 1) / x;
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(y), static_cast<uint32_t>(depth)};
}

template <typename Push>
std::span<const std::byte> push_bytes(const Push& push) {
  return std::as_bytes(std::span(&push, 1));
}

}  // namespace

void matmul(CommandBatch& batch, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y) {
  check_addressable(w.buffer(), "the weights");
  check_floats(x, n_tok * w.n_cols(), "x");
  check_floats(y, n_tok * w.n_rows(), "y");
  const PipelineSpec spec{matmul_shader(w.type()), 3, sizeof(MatmulPush), 1u << 2};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const MatmulPush push{static_cast<uint32_t>(w.n_rows()), static_cast<uint32_t>(w.n_cols()),
                        static_cast<uint32_t>(n_tok), static_cast<uint32_t>(w.row_bytes())};
  const std::array<const VulkanBuffer*, 3> buffers{&w.buffer(), &x, &y};
  const int64_t tiles = (n_tok + kMatmulTokenTile - 1) / kMatmulTokenTile;
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), w.n_rows(), tiles));
}

void matmul(VulkanDevice& device, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y) {
  CommandBatch batch(device);
  matmul(batch, w, x, n_tok, y);
  batch.submit_and_wait();
}

void rms_norm_rows(CommandBatch& batch, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows) {
  check_floats(x, width * n_rows, "x");
  check_floats(out, width * n_rows, "out");
  if (weight != nullptr) check_floats(*weight, width, "the norm weight");
  const PipelineSpec spec{"rms_norm", 3, sizeof(RmsNormPush), 1u << 2};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const RmsNormPush push{static_cast<uint32_t>(width), static_cast<uint32_t>(n_rows), eps,
                         weight != nullptr ? 1u : 0u};
  // Without a weight the shader never reads binding 1: x stands in for it.
  const std::array<const VulkanBuffer*, 3> buffers{&x, weight != nullptr ? weight : &x, &out};
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), n_rows, 1));
}

void rms_norm_rows(VulkanDevice& device, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows) {
  CommandBatch batch(device);
  rms_norm_rows(batch, x, weight, eps, out, width, n_rows);
  batch.submit_and_wait();
}

}  // namespace cortiq::vulkan
