// RWKV's time mixing (llama.cpp's rwkv6 and rwkv7 graphs), the recurrent
// half of an RWKV layer: each row mixes with its sequence's previous row
// (the token shift), and heads of head_size channels keep a head_size x
// head_size key-value state (kernels/cpu/rwkv_wkv.hpp). With x the normed
// row, prev the previous one and sx = prev - x:
//
// RWKV-6 ("Finch"):
//   xxx        = sx * lerp_x + x
//   m_p        = w2[p] · tanh(w1 · xxx)[p]           p = w, k, v, r, g
//   x_p        = (m_p + lerp_p) * sx + x             (lerp_fused or lerp_{w,k,v,r,g})
//   r, k, v    = receptance · x_r, key · x_k, value · x_v;  g = silu(gate · x_g)
//   w          = exp(-exp(decay_w2 · tanh(decay_w1 · x_w) + decay))
//   y          = wkv6(r, k, v, u = time_mix_first, w)
//
// RWKV-7 ("Goose"):
//   x_p        = sx * lerp_p + x                     p = r, w, k, v, a, g (lerp_fused)
//   r, k, v    = receptance · x_r, key · x_k, value · x_v
//   w          = exp(sigmoid(w2 · tanh(w1 · x_w) + w0) * -0.606531)
//   v         += (v_first - v) * sigmoid(v2 · (v1 · x_v) + v0)   layers after the
//                first, whose v is v_first
//   g          = g2 · sigmoid(g1 · x_g);  a = sigmoid(a2 · (a1 · x_a) + a0)
//   kk         = l2_norm per head(k * k_k);  k += a * (k * k_a) - k * k_a
//   y          = wkv7(r, w, k, v, -kk, kk * a)
//   y         += v * sum per head(k * r * r_k)      after the norm below
//
// Both then norm each head (a layer norm, eps 64e-5 as llama.cpp fixes it,
// times time_mix_ln plus its bias), multiply by g and project by
// time_mix_output. The token shift is part of the state (the layer's last
// normed row); prefill runs the rows in order, so any chunking gives the
// bits of decoding token by token.
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

struct Rwkv6TimeMixWeights {
  std::vector<float> lerp_x;               // [n_embd]
  std::vector<float> lerp;                 // [5][n_embd]: w, k, v, r, g
  kernels::WeightView w1;                  // [n_embd -> 5 mix_rank]
  std::vector<kernels::WeightView> w2;     // 5 x [mix_rank -> n_embd]
  std::vector<float> first;                // [n_embd]: u, per head and channel
  std::vector<float> decay;                // [n_embd]
  kernels::WeightView decay_w1, decay_w2;  // [n_embd -> decay_rank -> n_embd]
  kernels::WeightView key, value, receptance, gate, output;
  std::vector<float> ln, ln_bias;  // [n_embd]

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

struct Rwkv7TimeMixWeights {
  std::vector<float> lerp;        // [6][n_embd]: r, w, k, v, a, g
  std::vector<float> w0, a0, v0;  // [n_embd]
  kernels::WeightView w1, w2, a1, a2, v1, v2, g1, g2;
  std::vector<float> k_k, k_a, r_k;  // [n_embd]
  kernels::WeightView key, value, receptance, output;
  std::vector<float> ln, ln_bias;  // [n_embd]

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// The state a layer keeps per sequence, in floats: two shifted rows (the
// time mix's and the channel mix's) and every head's matrix.
inline int64_t rwkv_state_width(const ModelHParams& hp) {
  return 2 * hp.n_embd + hp.n_embd * hp.rwkv.head_size;
}
// Where the channel mix's shifted row starts in the state.
inline int64_t rwkv_channel_shift_offset(const ModelHParams& hp) {
  return hp.n_embd;
}

// The token shift: sx[r] = prev[r] - x[r], prev[r] the row before rows[r]
// in its sequence (for the first row of a sequence in this pass the one the
// state holds at `offset`, which ends holding each sequence's last row).
// x and sx [rows][n_embd].
void rwkv_token_shift(const ModelHParams& hp, std::span<const BatchRow> rows, int64_t layer,
                      int64_t offset, KvCache& cache, std::span<const float> x,
                      std::span<float> sx);
// out = sx * lerp + x, elementwise over [rows][lerp.size()] (llama.cpp's
// mul, then add: two roundings).
void rwkv_lerp_rows(std::span<const float> sx, std::span<const float> lerp,
                    std::span<const float> x, std::span<float> out);

// out = time_mix(x) for the rows in order: x and out [rows][n_embd].
void rwkv6_time_mix(const Rwkv6TimeMixWeights& w, const ModelHParams& hp, int64_t layer,
                    std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                    ConstTensor x, Tensor out);
// v_first [rows][n_embd]: the first layer's values, written by layer 0 and
// mixed into every later layer's.
void rwkv7_time_mix(const Rwkv7TimeMixWeights& w, const ModelHParams& hp, int64_t layer,
                    std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                    ConstTensor x, Tensor v_first, Tensor out);

}  // namespace cortiq
