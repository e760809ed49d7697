// PLaMo-2's Mamba layer (llama.cpp's build_plamo2_mamba_layer): Mamba-2's
// scan (one decay per head, one B/C group) fed as Mamba 1 feeds its own,
// through a projection of the convolved x and RMS norms of B, C and dt:
//
//   per head h: z[h] | x[h] = ssm_in · h     [z | x] per head, head_dim each
//   x = silu(conv(x))                        a causal depthwise convolution
//                                            of conv_kernel taps, no bias
//   B | C | dt = ssm_x · x                   d_state, d_state, dt_dim
//                                            (max(64, n_embd / 16))
//   B, C, dt = rms_norm(.) * ssm_b_norm, ssm_c_norm, ssm_dt_norm
//   dt = ssm_dt · dt + dt_bias               one per head
//   per head h: Δ = softplus(dt[h]), a = exp(Δ · A[h])
//     state[h][i][:] = state[h][i][:] · a + B · (x[h][i] · Δ)
//     y[h][i] = state[h][i] · C + x[h][i] · D[h]
//   out = ssm_out · (y * silu(z))
//
// Each sequence keeps the convolution's last conv_kernel - 1 inputs and the
// [d_inner][d_state] scan state (KvCache::state).
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

struct Plamo2MambaWeights {
  kernels::WeightView in_proj, x_proj, dt_proj, out_proj;  // ssm_in, ssm_x, ssm_dt, ssm_out
  std::vector<float> conv;                                 // ssm_conv1d [d_inner][taps]
  std::vector<float> dt_bias, a, d;                        // [n_head] each
  std::vector<float> dt_norm, b_norm, c_norm;              // [dt_dim], [d_state], [d_state]

  // blk.N.ssm_{in, conv1d, x, dt, a, d, out, dt_norm, b_norm, c_norm} as
  // llama.cpp's plamo2 loader (the norms without ".weight").
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// The low-rank step's width: max(64, n_embd / 16), as llama.cpp computes it.
inline int64_t plamo2_dt_dim(const ModelHParams& hp) {
  return hp.n_embd / 16 > 64 ? hp.n_embd / 16 : 64;
}

// The state one layer keeps per sequence, in floats.
inline int64_t plamo2_mamba_state_width(const ModelHParams& hp) {
  return (hp.ssm.conv_taps - 1) * hp.ssm.d_inner + hp.ssm.d_inner * hp.ssm.d_state;
}

// out[r] = plamo2_mamba(in[r]) for the rows in order, each sequence's state
// advanced row by row: in and out [rows][n_embd].
void plamo2_mamba(const Plamo2MambaWeights& w, const ModelHParams& hp, int64_t layer,
                  std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                  ConstTensor in, Tensor out);

}  // namespace cortiq
