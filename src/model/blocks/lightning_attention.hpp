// MiniMax-01's lightning attention (llama.cpp's minimax-01 graph): a linear
// attention whose memory is one D x D matrix per head, decayed at a fixed
// rate per head and layer:
//
//   q | k | v = silu(attn_qkv · h)        per head: q, k, v of D = key_length
//   g         = sigmoid(attn_gate · h)
//   per head j, with the ALiBi slope s_j = start^(j + 1), start =
//   2^(-2^-(log2(n_head) - 3)), scaled for layer l of L by
//   1 - l / (L - 1) + 1e-5, and lambda_j = exp(-scaled s_j):
//     o[j]  = (lambda_j q) · S_j + (q · k) v      S_j[a][b]: key a, value b
//     S_j   = lambda_j S_j + k vᵀ
//   out = attn_output · (rms_norm(o over every head) * attn_norm_2 * g)
//
// llama.cpp computes a ubatch as one block (the decays of each position
// inside it as exponentials of their distance); this is the same sum one
// row at a time, so a prompt gives the same bits in any chunking as
// token-by-token decoding, and llama.cpp's with a batch of one row agrees
// within rounding. attn_qkv.scale and attn_output.scale are loaded, not
// applied, as its graph projects with the bare matrices.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "kv/batch.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class KvCache;
class TensorVisitor;

struct LightningAttentionWeights {
  kernels::WeightView qkv;   // attn_qkv [n_embd, 3 n_head D], per head q | k | v
  kernels::WeightView gate;  // attn_gate [n_embd, n_head D]
  kernels::WeightView out;   // attn_output [n_head D, n_embd]
  std::vector<float> norm;   // attn_norm_2 [n_head D]

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// The state one layer keeps per sequence, in floats: the heads' matrices.
inline int64_t lightning_attention_state_width(const ModelHParams& hp) {
  return hp.n_head * hp.head_dim_k * hp.head_dim_k;
}

// out[r] = lightning_attention(in[r]) for the rows in order, each
// sequence's matrices advanced row by row: in and out [rows][n_embd].
void lightning_attention(const LightningAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                         std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                         ConstTensor in, Tensor out);

}  // namespace cortiq
