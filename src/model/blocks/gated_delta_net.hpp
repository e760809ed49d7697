// The Gated DeltaNet layer of Qwen3-Next and Qwen3.5 (llama.cpp's
// build_layer_attn_linear and its delta-net base), a linear attention whose
// memory is one S x S matrix per value head:
//
//   q | k | v = attn_qkv · h          q, k: n_group key heads of d_state;
//   z         = attn_gate · h         v, z: time_step_rank value heads of d_state
//   beta = sigmoid(ssm_beta · h),  g = softplus(ssm_alpha · h + dt_bias) * A
//   q | k | v = silu(conv(q | k | v))     a causal depthwise convolution of
//                                         conv_kernel taps, no bias
//   q, k = l2_norm per head (eps: rms_eps)
//   per value head h, with key head kh (h / (H_v / H_k) for Qwen3-Next,
//   h % H_k for Qwen3.5, as llama.cpp repeats the key heads):
//     S = exp(g[h]) * S                                  S[j][i]: value j, key i
//     S[j][:] += k[kh] * beta[h] * (v[h][j] - S[j] · k[kh])
//     o[h][j] = (S[j] · q[kh]) / sqrt(d_state)
//   y = rms_norm per head(o) * ssm_norm * silu(z)
//   out = ssm_out · y
//
// This is the recurrent form, applied row by row in prefill too, so a prompt
// gives the same bits in any chunking and batch as token-by-token decoding
// (docs/architecture.md, "Gated DeltaNet"). llama.cpp's graph has a chunked
// form (64-row blocks, a triangular solve) for backends without its fused
// op; its CPU backend runs this recurrence (ggml_gated_delta_net).
//
// Each sequence keeps the convolution's last conv_kernel - 1 inputs and the
// S matrices in the KV cache (KvCache::state).
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

// How a family's files carry the layer, as llama.cpp reads them.
struct GatedDeltaNetTensors {
  // Qwen3.5: ssm_beta and ssm_alpha [n_embd, H_v] apart, every projection's
  // scale applied, key heads tiled. Qwen3-Next: one ssm_ba
  // [n_embd, 2 H_v] (per key head: its value heads' beta, then their
  // alpha), no scale applied, key heads interleaved, and its older files'
  // fused ssm_in (per key head: q, k, v, z) in place of attn_qkv and
  // attn_gate.
  bool qwen35 = false;
};

struct GatedDeltaNetWeights {
  kernels::WeightView qkv, z;       // attn_qkv, attn_gate
  kernels::WeightView qkvz;         // or the fused ssm_in (Qwen3-Next's older files)
  kernels::WeightView unused_qkvz;  // ssm_in beside attn_qkv: loaded, not run (llama.cpp)
  kernels::WeightView beta_alpha;   // ssm_ba (Qwen3-Next)
  kernels::WeightView beta, alpha;  // ssm_beta, ssm_alpha (Qwen3.5)
  kernels::WeightView out;          // ssm_out
  float qkv_scale = 1, z_scale = 1, beta_scale = 1, alpha_scale = 1, out_scale = 1;
  std::vector<float> conv;        // ssm_conv1d [conv_width][taps]
  std::vector<float> dt_bias, a;  // [H_v] each; a = -exp(A_log)
  std::vector<float> norm;        // ssm_norm [d_state]
  bool tiled_key_heads = false;   // value head h reads key head h % H_k

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, GatedDeltaNetTensors extra);
};

class HParamReader;

// ARCH.ssm.* for a Gated DeltaNet (as read_ssm_hparams), checked for what
// its graph assumes: value heads as wide as key heads (inner_size =
// state_size * time_step_rank) and a whole number of value heads per key head.
void read_gated_delta_net_hparams(const HParamReader& keys, ModelHParams& hp);

// The state one layer keeps per sequence, in floats: the convolution's
// inputs, then the value heads' S matrices.
inline int64_t gated_delta_net_state_width(const ModelHParams& hp) {
  const auto& s = hp.ssm;
  return (s.conv_taps - 1) * s.conv_width() + s.n_head * s.d_state * s.d_state;
}

// out[r] = gated_delta_net(in[r]) for the rows in order, each sequence's
// state advanced row by row: in and out [rows][n_embd].
void gated_delta_net(const GatedDeltaNetWeights& w, const ModelHParams& hp, int64_t layer,
                     std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                     ConstTensor in, Tensor out);

}  // namespace cortiq
