// Multi-head latent attention (MiniCPM3, DeepSeek V2/V3): queries through a
// low-rank bottleneck (or one projection: DeepSeek-V2-Lite), keys and
// values from one compressed latent per token plus one shared rope key.
//
//   q      = q_b · (rms_norm(q_a · x) * q_a_norm)     [n_head][nope | rope]
//            (or attn_q · x)
//   c | kr = kv_a_mqa · x                             latent, shared rope key
//   c      = rms_norm(c) * kv_a_norm;  kr = rope(kr)
//   q_h    = q_h's nope | rope(q_h's rope)
//
// Two forms, as the file says (llama.cpp's is_mla):
// - expanded (attn_kv_b; MiniCPM3 and DeepSeek files converted before
//   the split): kn_h | v_h = kv_b · c, k_h = kn_h | kr, then attention
//   with one KV head per head; the cache holds every head's key and value
//   (LayerSpec: n_head_kv = n_head, head_dim_k = nope + rope).
// - absorbed (attn_k_b, attn_v_b: a matrix per head): the query's nope part
//   is taken into latent space, qa_h = k_b_h · qn_h | rope(q_h's rope), and
//   every head attends to the one cached row c | kr per position, whose
//   first kv_lora_rank values are also the value; each head's result goes
//   back through v_b_h. The cache holds kv_lora_rank + rope values per
//   token and layer (LayerSpec: one KV head, head_dim_k = kv_lora_rank +
//   rope, head_dim_v = kv_lora_rank, values_in_keys), a head's real sizes
//   in hp.mla_head_dim_k / mla_head_dim_v.
//
// Then the output projection, as the attention block's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "model/blocks/attention.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class KvCache;
class TensorVisitor;

struct LatentAttentionWeights {
  kernels::WeightView wq;          // attn_q: n_embd -> n_head * qk, when q_lora_rank is 0
  kernels::WeightView wq_a, wq_b;  // attn_q_a: n_embd -> q_lora_rank; attn_q_b: -> n_head * qk
  kernels::WeightView wkv_a;       // attn_kv_a_mqa: n_embd -> kv_lora_rank + rope
  kernels::WeightView wkv_b;       // attn_kv_b: kv_lora_rank -> n_head * (nope + v) (expanded)
  std::vector<kernels::WeightView> wk_b;  // attn_k_b, per head: nope -> kv_lora_rank (absorbed)
  std::vector<kernels::WeightView> wv_b;  // attn_v_b, per head: kv_lora_rank -> v (absorbed)
  kernels::WeightView wo;                 // attn_output: n_head * v -> n_embd
  std::vector<float> q_a_norm, kv_a_norm;
  float o_scale = 1;  // attn_output.scale, 1 when absent

  // blk.N.attn_{q_a,q_a_norm,q_b | q}, attn_kv_a_mqa, attn_kv_a_norm,
  // attn_kv_b | attn_k_b and attn_v_b, attn_output, and the output's
  // optional scale (llama.cpp's generic pass reads it for attn_output, and
  // attn_q's without effect; the input scales have none).
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// out[r] = latent_attention(in[r]) for every row of the pass at layer
// `layer`: `in` the normed input [rows][n_embd], `out` [rows][n_embd].
void latent_attention(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                      const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                      ConstTensor in, Tensor out);

}  // namespace cortiq
