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
  uint32_t x_offset;
  uint32_t y_offset;
  uint32_t y_stride;
};

struct RmsNormPush {
  uint32_t width;
  uint32_t n_rows;
  float eps;
  uint32_t weight_rows;
  uint32_t x_offset;
  uint32_t out_offset;
};

struct LayerNormPush {
  uint32_t width;
  uint32_t n_rows;
  float eps;
  uint32_t weight_rows;
  uint32_t has_bias;
  uint32_t x_offset;
  uint32_t out_offset;
};

struct ElementPush {
  uint32_t op;
  uint32_t n;
  uint32_t x_offset;
  uint32_t b_offset;
  uint32_t out_offset;
  uint32_t width;
  float p0;
  float p1;
  uint32_t group;
  float p2;
  float p3;
};

// Invocations per element-wise workgroup (local_size_x of elementwise.comp).
constexpr int64_t kElementGroup = 256;

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
    case GgmlType::BF16:
      return "matmul_bf16";
    case GgmlType::IQ4_NL:
      return "matmul_iq4_nl";
    case GgmlType::Q4_K:
      return "matmul_q4_k";
    case GgmlType::Q5_K:
      return "matmul_q5_k";
    case GgmlType::Q6_K:
      return "matmul_q6_k";
    case GgmlType::Q2_K:
      return "matmul_q2_k";
    case GgmlType::Q3_K:
      return "matmul_q3_k";
    case GgmlType::IQ4_XS:
      return "matmul_iq4_xs";
    case GgmlType::MXFP4:
      return "matmul_mxfp4";
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

void check_floats(const VulkanBuffer& buffer, int64_t n, std::string_view what,
                  uint64_t offset = 0) {
  if (n <= 0 || buffer.size() / sizeof(float) < offset + static_cast<uint64_t>(n)) {
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

void matmul(CommandBatch& batch, const VulkanMatrix& w, const VulkanBuffer& x, uint64_t x_offset,
            int64_t n_tok, VulkanBuffer& y, uint64_t y_offset, int64_t y_stride) {
  check_addressable(w.buffer(), "the weights");
  check_floats(x, n_tok * w.n_cols(), "x", x_offset);
  if (y_stride < w.n_rows()) throw Error("vulkan: matmul's output stride is below its rows");
  check_floats(y, (n_tok - 1) * y_stride + w.n_rows(), "y", y_offset);
  const PipelineSpec spec{matmul_shader(w.type()), 3, sizeof(MatmulPush), 1u << 2};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const MatmulPush push{static_cast<uint32_t>(w.n_rows()), static_cast<uint32_t>(w.n_cols()),
                        static_cast<uint32_t>(n_tok),      static_cast<uint32_t>(w.row_bytes()),
                        static_cast<uint32_t>(x_offset),   static_cast<uint32_t>(y_offset),
                        static_cast<uint32_t>(y_stride)};
  const std::array<const VulkanBuffer*, 3> buffers{&w.buffer(), &x, &y};
  const int64_t tiles = (n_tok + kMatmulTokenTile - 1) / kMatmulTokenTile;
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), w.n_rows(), tiles));
}

void matmul(CommandBatch& batch, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y) {
  matmul(batch, w, x, 0, n_tok, y, 0, w.n_rows());
}

void matmul(VulkanDevice& device, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y) {
  CommandBatch batch(device);
  matmul(batch, w, x, n_tok, y);
  batch.submit_and_wait();
}

void rms_norm_rows(CommandBatch& batch, const VulkanBuffer& x, uint64_t x_offset,
                   const VulkanBuffer* weight, float eps, VulkanBuffer& out, uint64_t out_offset,
                   int64_t width, int64_t n_rows, int64_t weight_rows) {
  check_floats(x, width * n_rows, "x", x_offset);
  check_floats(out, width * n_rows, "out", out_offset);
  if (weight != nullptr) check_floats(*weight, width * weight_rows, "the norm weight");
  const PipelineSpec spec{"rms_norm", 3, sizeof(RmsNormPush), 1u << 2};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const RmsNormPush push{static_cast<uint32_t>(width),
                         static_cast<uint32_t>(n_rows),
                         eps,
                         weight != nullptr ? static_cast<uint32_t>(weight_rows) : 0u,
                         static_cast<uint32_t>(x_offset),
                         static_cast<uint32_t>(out_offset)};
  // Without a weight the shader never reads binding 1: x stands in for it.
  const std::array<const VulkanBuffer*, 3> buffers{&x, weight != nullptr ? weight : &x, &out};
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), n_rows, 1));
}

void rms_norm_rows(CommandBatch& batch, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows) {
  rms_norm_rows(batch, x, 0, weight, eps, out, 0, width, n_rows);
}

void layer_norm_rows(CommandBatch& batch, const LayerNormArgs& args) {
  if (args.n_rows <= 0) return;
  check_floats(*args.x, args.width * args.n_rows, "x", args.x_offset);
  check_floats(*args.out, args.width * args.n_rows, "out", args.out_offset);
  if (args.weight != nullptr) {
    check_floats(*args.weight, args.width * args.weight_rows, "the norm weight");
  }
  if (args.bias != nullptr) check_floats(*args.bias, args.width * args.bias_rows, "the norm bias");
  const PipelineSpec spec{"layer_norm", 4, sizeof(LayerNormPush), 1u << 3};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const LayerNormPush push{static_cast<uint32_t>(args.width),
                           static_cast<uint32_t>(args.n_rows),
                           args.eps,
                           args.weight != nullptr ? static_cast<uint32_t>(args.weight_rows) : 0u,
                           args.bias != nullptr ? static_cast<uint32_t>(args.bias_rows) : 0u,
                           static_cast<uint32_t>(args.x_offset),
                           static_cast<uint32_t>(args.out_offset)};
  // An absent weight or bias is never read: x stands in for it.
  const std::array<const VulkanBuffer*, 4> buffers{
      args.x, args.weight != nullptr ? args.weight : args.x,
      args.bias != nullptr ? args.bias : args.x, args.out};
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), args.n_rows, 1));
}

void elementwise(CommandBatch& batch, const ElementArgs& args) {
  if (args.n <= 0) return;
  const bool halves = args.op == ElementOp::swiglu_halves || args.op == ElementOp::geglu_halves;
  const int64_t x_floats = halves                                 ? 2 * args.n
                           : args.op == ElementOp::sum_row_groups ? args.n * args.group
                                                                  : args.n;
  check_floats(*args.x, x_floats, "x", args.x_offset);
  check_floats(*args.out, args.n, "out", args.out_offset);
  const VulkanBuffer* b = args.b != nullptr ? args.b : args.x;
  const bool gelu = reads_gelu_table(args.op);
  if (gelu) {
    if (args.gelu_table == nullptr) throw Error("vulkan: a GELU op without its table");
    check_floats(*args.gelu_table, 65536, "the GELU table");
  }
  const PipelineSpec spec{"elementwise", 4, sizeof(ElementPush), 1u << 2};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const ElementPush push{static_cast<uint32_t>(args.op),
                         static_cast<uint32_t>(args.n),
                         static_cast<uint32_t>(args.x_offset),
                         static_cast<uint32_t>(args.b_offset),
                         static_cast<uint32_t>(args.out_offset),
                         args.width,
                         args.p0,
                         args.p1,
                         args.group,
                         args.p2,
                         args.p3};
  // The other ops never read binding 3: x stands in for it.
  const std::array<const VulkanBuffer*, 4> buffers{args.x, b, args.out,
                                                   gelu ? args.gelu_table : args.x};
  const int64_t groups = (args.n + kElementGroup - 1) / kElementGroup;
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), groups, 1));
}

void rms_norm_rows(VulkanDevice& device, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows) {
  CommandBatch batch(device);
  rms_norm_rows(batch, x, weight, eps, out, width, n_rows);
  batch.submit_and_wait();
}

namespace {

struct RopePush {
  uint32_t n, n_heads, head_dim, n_dims, neox, x_offset, table_offset;
};

struct AttentionPush {
  uint32_t n_rows, n_head, n_head_kv, dk, dv, q_offset, out_offset, max_kv;
  float scale, dot_scale, softcap;
  uint32_t has_sinks, has_alibi;
};

}  // namespace

void rope_rows(CommandBatch& batch, const RopeArgs& args) {
  const int64_t n = args.n_rows * args.n_heads * (args.n_dims / 2);
  if (n <= 0) return;
  check_floats(*args.x, args.n_rows * args.n_heads * args.head_dim, "x", args.x_offset);
  check_floats(*args.table, args.n_rows * args.n_dims, "the RoPE table", args.table_offset);
  const PipelineSpec spec{"rope", 2, sizeof(RopePush), 1u << 0};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const RopePush push{static_cast<uint32_t>(n),
                      static_cast<uint32_t>(args.n_heads),
                      static_cast<uint32_t>(args.head_dim),
                      static_cast<uint32_t>(args.n_dims),
                      args.neox ? 1u : 0u,
                      static_cast<uint32_t>(args.x_offset),
                      static_cast<uint32_t>(args.table_offset)};
  const std::array<const VulkanBuffer*, 2> buffers{args.x, args.table};
  constexpr int64_t kGroup = 64;  // local_size_x of rope.comp
  const int64_t groups = (n + kGroup - 1) / kGroup;
  batch.dispatch(pipeline, buffers, push_bytes(push), row_grid(batch.device(), groups, 1));
}

void attention(CommandBatch& batch, const AttentionArgs& args) {
  if (args.n_rows <= 0) return;
  if (args.n_head % args.n_head_kv != 0) throw Error("vulkan: attention heads must group evenly");
  check_floats(*args.q, args.n_rows * args.n_head * args.dk, "q", args.q_offset);
  check_floats(*args.out, args.n_rows * args.n_head * args.dv, "out", args.out_offset);
  check_floats(*args.scores, args.n_rows * args.n_head * std::max<int64_t>(args.max_kv, 1),
               "the scores");
  const PipelineSpec spec{args.f16 ? "attention_f16" : "attention", 8, sizeof(AttentionPush),
                          (1u << 5) | (1u << 6)};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const AttentionPush push{static_cast<uint32_t>(args.n_rows),
                           static_cast<uint32_t>(args.n_head),
                           static_cast<uint32_t>(args.n_head_kv),
                           static_cast<uint32_t>(args.dk),
                           static_cast<uint32_t>(args.dv),
                           static_cast<uint32_t>(args.q_offset),
                           static_cast<uint32_t>(args.out_offset),
                           static_cast<uint32_t>(args.max_kv),
                           args.scale,
                           args.dot_scale,
                           args.softcap,
                           args.sinks != nullptr ? 1u : 0u,
                           args.slopes != nullptr ? 1u : 0u};
  // Without sinks or ALiBi the shader never reads bindings 4 or 7: q stands
  // in for them.
  const std::array<const VulkanBuffer*, 8> buffers{args.q,
                                                   args.keys,
                                                   args.values,
                                                   args.rows,
                                                   args.sinks != nullptr ? args.sinks : args.q,
                                                   args.scores,
                                                   args.out,
                                                   args.slopes != nullptr ? args.slopes : args.q};
  batch.dispatch(pipeline, buffers, push_bytes(push),
                 {static_cast<uint32_t>(args.n_head), static_cast<uint32_t>(args.n_rows), 1u});
}

namespace {

struct KvStorePush {
  uint32_t n_rows, width, src_offset;
};

}  // namespace

void kv_store_f16(CommandBatch& batch, const KvStoreF16Args& args) {
  if (args.n_rows <= 0) return;
  if (args.width % 2 != 0) throw Error("vulkan: f16 KV rows must have an even width");
  check_floats(*args.src, args.n_rows * args.width, "the rows", args.src_offset);
  check_addressable(*args.dst, "the f16 KV buffer");
  const PipelineSpec spec{"kv_store_f16", 3, sizeof(KvStorePush), 1u << 1};
  const ComputePipeline& pipeline = batch.device().pipelines().get(spec);
  const KvStorePush push{static_cast<uint32_t>(args.n_rows), static_cast<uint32_t>(args.width),
                         static_cast<uint32_t>(args.src_offset)};
  const std::array<const VulkanBuffer*, 3> buffers{args.src, args.dst, args.dst_rows};
  constexpr int64_t kGroup = 64;  // local_size_x of kv_store_f16.comp
  const int64_t words = args.n_rows * args.width / 2;
  batch.dispatch(pipeline, buffers, push_bytes(push),
                 row_grid(batch.device(), (words + kGroup - 1) / kGroup, 1));
}

}  // namespace cortiq::vulkan
