// Kimi Delta Attention (KDA), the linear attention of Kimi Linear
// (llama.cpp's kimi-linear graph): Gated DeltaNet's delta rule with a decay
// per key channel instead of one per head. Per head h of d = kda.head_dim:
//
//   q, k, v = silu(conv(attn_{q,k,v} · x))   a causal depthwise convolution
//                                            each, conv_kernel taps, no bias
//   g    = A[h] * softplus(ssm_f_b · (ssm_f_a · x) + dt_bias)    [d] per head
//   beta = sigmoid(ssm_beta · x)[h]
//   q, k = l2_norm per head (eps: rms_eps)
//   S[j][i] *= exp(g[i]);  S[j] += k * beta * (v_j - S[j] · k)   S[j][i]: value j, key i
//   o[j] = (S[j] · q) / sqrt(d)
//   y    = rms_norm per head(o) * ssm_norm * sigmoid(ssm_g_b · (ssm_g_a · x))
//   out  = attn_output · y
//
// The recurrent form, row by row in prefill too, as Gated DeltaNet's
// (docs/architecture.md): a prompt gives the same bits in any chunking.
// Each sequence keeps the three convolutions' last conv_kernel - 1 inputs
// (q's channels, then k's, then v's) and the heads' S matrices.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "kv/batch.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class HParamReader;
class KvCache;
class TensorVisitor;

struct KimiDeltaAttentionWeights {
  kernels::WeightView q, k, v;   // attn_q, attn_k, attn_v [n_embd, H d]
  kernels::WeightView f_a, f_b;  // ssm_f_a [n_embd, d], ssm_f_b [d, H d]
  kernels::WeightView beta;      // ssm_beta [n_embd, H]
  kernels::WeightView g_a, g_b;  // ssm_g_a [n_embd, d], ssm_g_b [d, H d]
  kernels::WeightView out;       // attn_output [H d, n_embd]
  std::vector<float> conv;       // ssm_conv1d_q | _k | _v: [3 H d][taps]
  std::vector<float> a;          // ssm_a [H], -exp(A_log) as converted
  std::vector<float> dt_bias;    // ssm_dt.bias [H d]
  std::vector<float> norm;       // ssm_norm [d]

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// kda.head_dim and ssm.conv_kernel into hp.ssm: heads hp.n_head of d_state
// = head_dim, one key head per value head (n_group = n_head), so
// conv_width() is q | k | v.
void read_kimi_delta_attention_hparams(const HParamReader& keys, ModelHParams& hp);

// The state one layer keeps per sequence, in floats.
inline int64_t kimi_delta_attention_state_width(const ModelHParams& hp) {
  const auto& s = hp.ssm;
  return (s.conv_taps - 1) * s.conv_width() + s.n_head * s.d_state * s.d_state;
}

// out[r] = kimi_delta_attention(in[r]) for the rows in order, each
// sequence's state advanced row by row: in and out [rows][n_embd].
void kimi_delta_attention(const KimiDeltaAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                          std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                          ConstTensor in, Tensor out);

}  // namespace cortiq
