// The first Vulkan ops, as plain functions on device buffers. Each records
// into a CommandBatch (the normal path: many ops, one submit); the overloads
// taking a VulkanDevice run one op in a batch of its own.
//
// Batch invariance: an output row is reduced in an order that depends only
// on its own sizes, never on how many rows or tokens run beside it, so token
// t gives the same bits whether n_tok is 1 or 37.
#pragma once

#include <cstdint>

namespace cortiq::vulkan {

class CommandBatch;
class VulkanBuffer;
class VulkanDevice;
class VulkanMatrix;

// y[t][r] = dot(W row r, x row t) for t < n_tok: x holds n_tok rows of
// n_cols floats, y n_tok rows of n_rows floats. Float32 accumulation.
// Throws cortiq::Error when the buffers are too small or too large for the
// device (one binding must span a whole buffer).
void matmul(CommandBatch& batch, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y);
// The same from x_offset floats into x, into y from y_offset, each output
// row y_stride floats after the last (y_stride >= w's rows).
void matmul(CommandBatch& batch, const VulkanMatrix& w, const VulkanBuffer& x, uint64_t x_offset,
            int64_t n_tok, VulkanBuffer& y, uint64_t y_offset, int64_t y_stride);
void matmul(VulkanDevice& device, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y);

// out = x / sqrt(mean(x^2) + eps) * weight for each of n_rows rows of
// `width` floats (kernels/cpu/norm.hpp's rms_norm_rows). weight is width
// floats, or null for none; out may be x.
void rms_norm_rows(CommandBatch& batch, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows);
// The same from x_offset / out_offset floats into x / out, with a weight
// of weight_rows rows of width that the rows take in turn (a row per head).
void rms_norm_rows(CommandBatch& batch, const VulkanBuffer& x, uint64_t x_offset,
                   const VulkanBuffer* weight, float eps, VulkanBuffer& out, uint64_t out_offset,
                   int64_t width, int64_t n_rows, int64_t weight_rows = 1);
void rms_norm_rows(VulkanDevice& device, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows);

// Layer norm of n_rows rows of `width` floats (kernels/cpu/norm.hpp's
// layer_norm_rows); weight and bias are weight_rows / bias_rows rows of
// width floats that the rows take in turn, or null for none.
struct LayerNormArgs {
  const VulkanBuffer* x = nullptr;
  uint64_t x_offset = 0;
  const VulkanBuffer* weight = nullptr;
  const VulkanBuffer* bias = nullptr;
  float eps = 1e-5f;
  VulkanBuffer* out = nullptr;
  uint64_t out_offset = 0;
  int64_t width = 0, n_rows = 0;
  int64_t weight_rows = 1, bias_rows = 1;
};
void layer_norm_rows(CommandBatch& batch, const LayerNormArgs& args);

// The element-wise ops (shaders/elementwise.comp): out[i] = f(x[i], b[..])
// for i < n, as the CPU kernels compute them. The codes are the shader's.
enum class ElementOp : uint32_t {
  add,            // x + b
  add_bias_rows,  // x + b[i % width]
  scale,          // x * p0
  clamp,          // min(max(x, p0), p1), ggml's order
  softcap,        // tanh(x / p0) * p0
  silu,
  gelu,  // through fp16, as the CPU's table
  relu_sqr,
  softplus,
  sigmoid,
  swiglu,         // silu(x) * b
  geglu,          // gelu(x) * b
  swiglu_halves,  // rows of x [gate | up], width each: silu(gate) * up
  geglu_halves,
  relu,
  silu_ratio,      // silu(x) / x
  reglu,           // relu(x) * b
  swiglu_oai,      // kernels::swiglu_oai(x, b) with alpha p0, limit p1
  scale_rows,      // x * b[i / width]
  sum_row_groups,  // out row r = x rows r * group .. + group - 1, added in order
  divide_rows,     // x / b[i % width]
  xielu,           // kernels::xielu_inplace with alpha_n p0, alpha_p p1, beta p2, eps p3
};

struct ElementArgs {
  ElementOp op = ElementOp::add;
  int64_t n = 0;  // output elements
  const VulkanBuffer* x = nullptr;
  uint64_t x_offset = 0;            // floats
  const VulkanBuffer* b = nullptr;  // the second operand, or null
  uint64_t b_offset = 0;
  VulkanBuffer* out = nullptr;  // may be x
  uint64_t out_offset = 0;
  uint32_t width = 0;
  float p0 = 0, p1 = 0, p2 = 0, p3 = 0;
  uint32_t group = 0;  // sum_row_groups
  // The GELU ops' table: 65536 floats, kernels::gelu_fp16_table() read as
  // floats (null for the other ops).
  const VulkanBuffer* gelu_table = nullptr;
};

void elementwise(CommandBatch& batch, const ElementArgs& args);
// Whether the op reads ElementArgs::gelu_table.
constexpr bool reads_gelu_table(ElementOp op) {
  return op == ElementOp::gelu || op == ElementOp::geglu || op == ElementOp::geglu_halves;
}

// RoPE in place of n_rows rows of n_heads heads (head_dim floats each) from
// x_offset floats into x, row r with the (cos, sin) pairs at
// table[table_offset + r * n_dims ...] (shaders/rope.comp).
struct RopeArgs {
  VulkanBuffer* x = nullptr;
  uint64_t x_offset = 0;
  const VulkanBuffer* table = nullptr;
  uint64_t table_offset = 0;
  int64_t n_rows = 0, n_heads = 0, head_dim = 0, n_dims = 0;
  bool neox = false;
};
void rope_rows(CommandBatch& batch, const RopeArgs& args);

// Attention of n_rows query rows over cached rows (shaders/attention.comp).
// `rows` holds, per query row, its first position, position count and the
// offset (in words of `rows`) of its positions' entries, then per position
// the offsets (in elements: floats, or halves with `f16`) of its key and
// value rows in `keys` / `values`.
struct AttentionArgs {
  bool f16 = false;  // an f16 cache (shaders/attention_f16.comp)
  const VulkanBuffer* q = nullptr;
  uint64_t q_offset = 0;
  const VulkanBuffer* keys = nullptr;
  const VulkanBuffer* values = nullptr;
  const VulkanBuffer* rows = nullptr;
  const VulkanBuffer* sinks = nullptr;   // n_head floats, or null
  const VulkanBuffer* slopes = nullptr;  // ALiBi's n_head slopes, or null
  VulkanBuffer* scores = nullptr;        // n_rows * n_head * max_kv floats of scratch
  VulkanBuffer* out = nullptr;
  uint64_t out_offset = 0;
  int64_t n_rows = 0, n_head = 0, n_head_kv = 0, dk = 0, dv = 0, max_kv = 0;
  float scale = 1, dot_scale = 1, softcap = 0;
};
void attention(CommandBatch& batch, const AttentionArgs& args);

// n_rows rows of `width` floats (even) from src_offset floats into src,
// rounded to f16, row r from word dst_rows[r] of `dst` (an f16 KV cache's
// buffer); dst_rows holds n_rows word offsets (shaders/kv_store_f16.comp).
struct KvStoreF16Args {
  const VulkanBuffer* src = nullptr;
  uint64_t src_offset = 0;
  const VulkanBuffer* dst = nullptr;  // written: the cache's buffer
  const VulkanBuffer* dst_rows = nullptr;
  int64_t n_rows = 0, width = 0;
};
void kv_store_f16(CommandBatch& batch, const KvStoreF16Args& args);

}  // namespace cortiq::vulkan
