// The op layer: what the model's blocks ask of the machine they run on.
//
// A block (model/blocks/) describes its math as a sequence of these ops on
// tensors (backends/tensor.hpp) and never calls a kernel itself; a backend
// carries them out where the tensors live. The CPU backend
// (backends/cpu/cpu_backend.hpp) runs today's kernels on the thread pool, bit
// for bit; a device backend records the same ops into its command stream.
//
// Ops are eager and in order: each one may read what the ops before it
// wrote. A device backend may queue them and run them later (one submit
// per forward pass), as long as host() is never asked of a tensor it holds.
//
// The descriptors ops take (kernels::WeightView, kernels::AttentionShape,
// kernels::RopeParams) are plain data shared by every backend; a weight is
// named by its view, and a backend that keeps its own copy of the weight
// finds it from there (weights are placed when the model is bound).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backends/tensor.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/weight_view.hpp"
#include "kv/batch.hpp"

namespace cortiq {

class KvCache;
class ThreadPool;

// One of several weights multiplied with the same input (matmul_shared_input)
// or each with its own (matmul_each_input): y[r * y_stride + o].
struct MatmulProduct {
  const kernels::WeightView* w = nullptr;
  Tensor y;
  int64_t y_stride = 0;
};

// Gated activations: out = act(gate) * up, element by element.
enum class GluOp : uint8_t {
  swiglu,      // silu(gate) * up
  geglu,       // gelu_tanh(gate) * up
  reglu,       // relu(gate) * up (ggml_reglu)
  swiglu_oai,  // GPT-OSS's clamped SwiGLU (kernels::swiglu_oai with kSwigluOai*)
};

// Activations in place, element by element.
enum class UnaryOp : uint8_t {
  silu,
  gelu,      // gelu_tanh
  relu_sqr,  // relu(x)^2
  softplus,
  sigmoid,
  relu,
  // silu(x) / x: Qwen2-MoE's shared-expert gate as llama.cpp computes it
  // (a sigmoid, NaN at x = 0).
  silu_ratio,
};

// Attention of a pass's query rows over the keys and values of their
// sequences in the cache, at one layer.
struct AttentionOp {
  std::span<const BatchRow> rows;
  int64_t layer = 0;
  kernels::AttentionShape shape;
  // Each query row's positions: causal ones attend to [start, pos], where
  // start is 0, pos - window + 1 (window > 0) or the start of pos's chunk
  // (chunk > 0); bidirectional ones to every position their sequence has
  // after the pass.
  int64_t window = 0;
  int64_t chunk = 0;
  bool causal = true;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "vulkan", ... (what --device takes).
  virtual std::string_view name() const = 0;
  // Threads for the work that stays on the host (token bookkeeping, and the
  // blocks a backend runs no ops for).
  virtual ThreadPool& host_pool() const = 0;
  // Whether the backend's tensors are host memory, which the blocks not on
  // the op layer yet can read (ForwardContext::host_only).
  virtual bool computes_on_host() const { return false; }
  // After a pass failed partway: drops what it recorded and has not run, so
  // the next pass starts clean (a device queues ops; the CPU has nothing).
  virtual void abandon_pass() {}

  // A tensor of n floats for the pass's intermediates, in the slot that one
  // of the caller's ForwardBuffers vectors names: the CPU grows and hands
  // out the vector itself, a device keeps a buffer of its own per slot and
  // leaves the vector empty. Valid until the slot is asked for again.
  virtual Tensor scratch(std::vector<float>& slot, size_t n) = 0;
  // Host floats into a tensor, and a tensor's floats out to the host
  // (sizes equal): a stage's input and output, the rows an op cannot take.
  virtual void copy_from_host(std::span<const float> src, Tensor dst) = 0;
  virtual void copy_to_host(ConstTensor src, std::span<float> dst) = 0;
  // n_rows rows of `width` floats from one layout to another:
  // dst[r * dst_stride + i] = src[r * src_stride + i] (a fused product's
  // columns into rows of their own). src and dst do not overlap.
  virtual void copy_rows(ConstTensor src, size_t src_stride, Tensor dst, size_t dst_stride,
                         size_t width, size_t n_rows) = 0;
  // Rows of `width` floats by index (the experts' inputs and outputs):
  // gather: dst row i = src row rows[i]; scatter: dst row rows[i] = src row
  // i. The rows of dst are distinct and do not overlap src.
  virtual void gather_rows(ConstTensor src, std::span<const int32_t> rows, Tensor dst,
                           size_t width) = 0;
  virtual void scatter_rows(ConstTensor src, Tensor dst, std::span<const int32_t> rows,
                            size_t width) = 0;
  // Where an op writes what the caller wants in host memory (logits): that
  // memory itself when the backend computes on the host, else a tensor in
  // `slot` that copy_to_host then delivers to it.
  virtual Tensor output_tensor(std::span<float> host, std::vector<float>& slot) = 0;

  // --- Products with weight matrices (kernels/cpu/matmul.hpp) ---
  // y[r * y_stride + o] = dot(W row o, x row r) for r < n_rows.
  virtual void matmul(const kernels::WeightView& w, ConstTensor x, int64_t n_rows, Tensor y,
                      int64_t y_stride) = 0;
  // Several weights of the same width, one input: the bits of separate
  // matmuls, in one dispatch.
  virtual void matmul_shared_input(std::span<const MatmulProduct> products, ConstTensor x,
                                   int64_t n_rows) = 0;
  // Several weights of the same width, each with its own one-row input.
  virtual void matmul_each_input(std::span<const MatmulProduct> products,
                                 std::span<const ConstTensor> inputs) = 0;
  // Row ids[i] of the table, as floats, into out[i * table.n_cols ...].
  virtual void get_rows(const kernels::WeightView& table, std::span<const int32_t> ids,
                        Tensor out) = 0;

  // --- Norms over rows of `width` (kernels/cpu/norm.hpp); out may be x ---
  virtual void rms_norm_rows(ConstTensor x, std::span<const float> weight, float eps, Tensor out,
                             size_t width) = 0;
  virtual void layer_norm_rows(ConstTensor x, std::span<const float> weight,
                               std::span<const float> bias, float eps, Tensor out,
                               size_t width) = 0;

  // --- Element-wise (kernels/cpu/activations.hpp) ---
  virtual void add(Tensor x, ConstTensor b) = 0;  // x += b
  // Each row of `rows` (as wide as bias) += bias; nothing for an empty bias.
  virtual void add_bias_rows(Tensor rows, std::span<const float> bias) = 0;
  // Each row of `rows` (as wide as divisor) /= divisor, element by element
  // (MPT's ffn_act scales, llama.cpp's ggml_div).
  virtual void divide_rows(Tensor rows, std::span<const float> divisor) = 0;
  virtual void scale(Tensor x, float s) = 0;
  // Row r of x (rows of `width`) times factors[r]; width 1 multiplies
  // element by element.
  virtual void scale_rows(Tensor x, ConstTensor factors, size_t width) = 0;
  // out row r = the rows r * group .. r * group + group - 1 of x added in
  // that order, ((x0 + x1) + x2) + ... (the experts' slots as llama.cpp
  // folds them).
  virtual void sum_row_groups(ConstTensor x, size_t group, Tensor out, size_t width) = 0;
  virtual void clamp(Tensor x, float lo, float hi) = 0;
  // x = tanh(x / cap) * cap (a final logit softcap).
  virtual void softcap(Tensor x, float cap) = 0;
  virtual void unary(UnaryOp op, Tensor x) = 0;
  // x = xIELU(x) with a layer's parameters (kernels::xielu_inplace; Apertus).
  virtual void xielu(Tensor x, const kernels::XieluParams& params) = 0;
  // out = act(gate) * up; out may be gate.
  virtual void glu(GluOp op, ConstTensor gate, ConstTensor up, Tensor out) = 0;
  // glu of each row of `both` split in halves [gate | up] of `width`.
  virtual void glu_halves(GluOp op, ConstTensor both, Tensor out, size_t width) = 0;

  // --- Positions ---
  // RoPE of each of n_rows rows of n_heads heads of head_dim floats, in
  // place, row r with the cos/sin table[r * params.n_dims ...]
  // (kernels::rope_cache of its position).
  virtual void rope_rows(Tensor x, size_t n_rows, int64_t n_heads, int64_t head_dim,
                         const kernels::RopeParams& params, std::span<const float> table) = 0;

  // --- The KV cache ---
  // Row r of k and v (k_width, v_width floats) into cell cells[r] of the layer;
  // v_width 0 stores keys only (a layer whose values are in its keys).
  virtual void store_kv(KvCache& cache, int64_t layer, std::span<const int32_t> cells,
                        ConstTensor k, ConstTensor v, size_t k_width, size_t v_width) = 0;
  // out [rows][n_head * head_dim_v] = attention of q [rows][n_head * head_dim_k].
  virtual void attention(const AttentionOp& op, const KvCache& cache, ConstTensor q,
                         Tensor out) = 0;
};

}  // namespace cortiq
