// The self-attention branch shared by the decoder families: Q/K/V
// projections (optional biases and per-tensor scales), optional RMS norms on
// Q and K (per head, or over the whole projection), RoPE from the layer's
// table, the rows' keys and values into the cache, GQA attention over the
// cache (causal, within the layer's sliding window), and the output
// projection; optionally ALiBi instead of RoPE and a clamp of Q/K/V (the
// model's alibi_max_bias, clamp_kqv). It computes the branch only: the family places the norms
// around it and the residual add (pre-norm, post-norm, sandwich, parallel).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/weight_view.hpp"
#include "kv/batch.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"
#include "model/rope_setup.hpp"

namespace cortiq {

class KvCache;
class TensorVisitor;

// Whether a family's layers carry norms on Q and K (attn_{q,k}_norm).
enum class QkNorm : uint8_t { none, optional, required };

// Their shape, when they are there.
enum class QkNormShape : uint8_t {
  head,            // RMS norms of each head, one weight row of head_dim for all heads
  whole,           // RMS norms over the whole Q / K projection (OLMo2)
  layer_per_head,  // layer norms without bias (hp.norm_eps), a weight row per head:
                   // [head_dim, n_head] and [head_dim, n_head_kv] (StableLM 2 12B, Command R+)
  rms_per_head,    // RMS norms, a weight row per head (PLaMo-2)
  // Layer norms over the whole projection, weights and biases each
  // optional, applied when attn_q_norm is there; then a missing attn_k_norm
  // is a layer norm without weight (MPT, with QkNorm::optional).
  layer_whole,
};

// Where Q, K and V come from.
enum class QkvForm : uint8_t {
  // attn_qkv.weight when the file has it, else attn_q/k/v, each with an
  // optional bias (llama.cpp's create_tensor_qkv, for every family whose
  // graph uses build_qkv).
  file_decides,
  // attn_qkv.weight only: Q/K/V apart are refused (llama.cpp creates
  // ATTN_QKV itself for GPT-2, BLOOM, Falcon...). gen-model writes it.
  fused,
  separate_with_biases,     // attn_q/k/v, each with its bias (Jais-2)
  separate_without_biases,  // attn_q/k/v, no biases (BitNet); their scales applied
};

// Which fused attn_qkv.bias a family reads: optional (create_tensor_qkv),
// required (GPT-2, BLOOM, ...) or none (Falcon's loader never creates it).
enum class FusedQkvBias : uint8_t { optional, required, none };

// What the Q/K/V biases and scales do.
enum class QkvEffect : uint8_t {
  applied,
  // Read but applied nowhere (OLMo2's graph projects Q/K/V without
  // build_qkv); a fused attn_qkv is not read.
  none,
  // Read but applied nowhere, the fused attn_qkv.weight read when the file
  // has it (its bias and scale without effect): MiMo V2's graph projects
  // with the bare matrix, fused or not.
  none_fused_readable,
};

// attn_output.bias.
enum class AttnOutputBias : uint8_t { none, optional, required };

// A gate on the attention's output rows, before attn_output.
enum class OutputGate : uint8_t {
  none,
  // attn_gate.weight (required): times softplus(attn_gate · x) of the
  // layer's normed input x, one value per head (attn_gate [n_embd, n_head]:
  // Laguna XS.2) or per element ([n_embd, n_head * head_dim_v]: Laguna
  // M.1), as the file's shape says (llama.cpp decides by it too).
  softplus,
  // attn_q.weight is [n_embd, 2 * q_width]: each head's queries, then as
  // many values of an output gate; the output times sigmoid(gate) (Qwen3-Next,
  // Qwen3.5). Q/K/V are separate, their biases read but applied nowhere
  // (llama.cpp's graph projects with the bare matrices), their scales applied.
  sigmoid_query,
};

// The tensors a family's attention may carry beyond Q/K/V/output and their
// optional Q/K/V biases and scales (which llama.cpp reads for every family):
// exactly what llama.cpp reads for it, so a file it refuses is refused here.
// One enum per choice; the flags are independent of each other.
struct AttentionTensors {
  QkvForm qkv = QkvForm::file_decides;
  FusedQkvBias fused_qkv_bias = FusedQkvBias::optional;  // a fused attn_qkv's bias
  // gen-model writes attn_qkv.weight (and its bias) instead of Q/K/V, as the
  // family's converter does (Phi-3); the loader follows the file either way.
  bool fused_qkv_written = false;
  QkvEffect qkv_effect = QkvEffect::applied;
  AttnOutputBias output_bias = AttnOutputBias::none;
  QkNorm qk_norm = QkNorm::none;
  QkNormShape qk_norm_shape = QkNormShape::head;
  // The Q/K norms apply to the rotated heads (RoPE first: Hunyuan, Maincoder).
  bool qk_norm_after_rope = false;
  // Each rotated head of Q and K RMS-normed without a weight after RoPE
  // (Llama 4's L2 norm, rms_eps); the unrotated layers keep theirs.
  bool qk_plain_norm_after_rope = false;
  OutputGate gate = OutputGate::none;
  // gen-model writes the softplus gate per element, else per head.
  bool gate_written_per_element = false;
  // attn_sub_norm.weight (required): an RMS norm of the attention's output
  // rows (attn_out_width) before attn_output (BitNet).
  bool sub_norm = false;
  // attn_sinks.weight [n_head] (required): one learned logit per head that
  // takes part in its softmax without a value (GPT-OSS).
  bool sinks = false;
};

struct AttentionWeights {
  kernels::WeightView wq, wk, wv, wo;
  std::vector<float> bq, bk, bv, bo;                         // empty when the file has none
  float q_scale = 1, k_scale = 1, v_scale = 1, o_scale = 1;  // NAME.scale, 1 when absent
  // attn_qkv.{weight,bias,scale} when the file has the fused projection
  // (then wq/wk/wv are empty): rows Q, then K, then V.
  kernels::WeightView wqkv;
  std::vector<float> bqkv;
  float qkv_scale = 1;
  std::vector<float> q_norm, k_norm;  // RMS norm weights (per head or whole row), or empty
  // How q_norm / k_norm apply: RMS norms (per head, or over the whole row,
  // or per head with a weight row per head),
  // layer norms with a weight row per head (StableLM 2 12B, Command R+), or
  // layer norms over the whole projection with optional biases (MPT).
  enum class QkNormKind : uint8_t { rms, rms_per_head, layer_per_head, layer_whole };
  QkNormKind qk_norm_kind = QkNormKind::rms;
  std::vector<float> q_norm_b, k_norm_b;  // layer_whole's biases, or empty
  bool qk_norm_after_rope = false;        // AttentionTensors::qk_norm_after_rope
  bool qk_plain_norm_after_rope = false;  // AttentionTensors::qk_plain_norm_after_rope
  std::vector<float> sub_norm;            // attn_sub_norm (AttentionTensors::sub_norm), or empty
  std::vector<float> sinks;               // attn_sinks (AttentionTensors::sinks), or empty
  kernels::WeightView gate;               // attn_gate (OutputGate::softplus), or empty
  bool gate_per_head = false;             // gate has one row per head, else one per element
  bool query_gate = false;                // OutputGate::sigmoid_query

  // blk.N.attn_{q,k,v,output}.weight (or attn_qkv.weight instead of Q/K/V),
  // the optional Q/K/V biases and every scale, and what `extra` allows.
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, AttentionTensors extra);

 private:
  void visit_softplus_gate(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                           AttentionTensors extra);
  void visit_output_bias(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                         AttentionTensors extra);
  void visit_qk_norms(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                      AttentionTensors extra);
  void visit_separate_qkv(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                          AttentionTensors extra);
};

// What every layer's attention shares within one forward pass.
struct AttentionPass {
  std::span<const BatchRow> rows;
  std::span<const int32_t> cells;          // each row's cache cell
  std::array<RopeTable, kRopeSlots> rope;  // by RopeSlot (global, local)
};

// out[r] = attention(in[r]) for every row of the pass at layer `layer`:
// `in` is the normed input [rows][n_embd], `out` [rows][n_embd].
void attention(const AttentionWeights& w, const ModelHParams& hp, int64_t layer,
               const AttentionPass& pass, KvCache& cache, ForwardContext& ctx, ConstTensor in,
               Tensor out);

// The attention temperature (ModelHParams::AttentionTemperature) of the
// query at position `pos`, computed as llama.cpp's llm_graph_input_attn_temp
// (float position, double logarithm); 1 when the model has none.
float attention_temperature(const ModelHParams& hp, int32_t pos);
// Each row's queries (q [rows][width]) times its position's attention
// temperature, when the model has one (as llama.cpp multiplies its Qcur).
void scale_by_temperature(const ModelHParams& hp, std::span<const BatchRow> rows,
                          ForwardContext& ctx, Tensor q, size_t width);

// The attention of attention(), for queries already projected and rotated
// whose keys and values are in the cache: q [rows][q width] -> out
// [rows][attn_out width] (before the output projection). For other
// attention blocks (latent attention).
void attend_over_cache(const ModelHParams& hp, int64_t layer, const AttentionPass& pass,
                       const KvCache& cache, ForwardContext& ctx, ConstTensor q, Tensor out);

}  // namespace cortiq
