// Multi-head latent attention (MiniCPM3; DeepSeek-V2's, computed without
// its absorbed form): queries through a low-rank bottleneck, keys and values
// expanded from one compressed latent per token.
//
//   q      = q_b · (rms_norm(q_a · x) * q_a_norm)     [n_head][nope | rope]
//   c | kr = kv_a_mqa · x                             latent, shared rope key
//   kn | v = kv_b · (rms_norm(c) * kv_a_norm)         [n_head][nope | head_dim_v]
//   k_h    = kn_h | rope(kr)                          every head the same rope part
//   q_h    = q_h's nope | rope(q_h's rope)            NeoX pairs over the rope dims
//
// then attention over the cache and the output projection, as the attention
// block's. The cache holds each head's full key and value (as llama.cpp's
// minicpm3 graph), so the layer's LayerSpec shapes it: n_head_kv = n_head,
// head_dim_k = nope + rope (attention.key_length), rope = rope.dimension_count.
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
  kernels::WeightView wq_a,
      wq_b;                   // attn_q_a: n_embd -> q_lora_rank; attn_q_b: -> n_head * head_dim_k
  kernels::WeightView wkv_a;  // attn_kv_a_mqa: n_embd -> kv_lora_rank + rope
  kernels::WeightView wkv_b;  // attn_kv_b: kv_lora_rank -> n_head * (nope + head_dim_v)
  kernels::WeightView wo;     // attn_output: n_head * head_dim_v -> n_embd
  std::vector<float> q_a_norm, kv_a_norm;
  float o_scale = 1;  // attn_output.scale, 1 when absent

  // blk.N.attn_{q_a,q_a_norm,q_b,kv_a_mqa,kv_a_norm,kv_b,output}.weight and
  // the output's optional scale (llama.cpp's generic pass reads it for
  // attn_output; its .input_scale has no effect).
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// out[r] = latent_attention(in[r]) for every row of the pass at layer
// `layer`: `in` the normed input [rows][n_embd], `out` [rows][n_embd].
void latent_attention(const LatentAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                      const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                      std::span<const float> in, std::span<float> out);

}  // namespace cortiq
