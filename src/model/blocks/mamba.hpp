// Mamba's selective state space layer (llama.cpp's build_mamba_layer), one
// state row per channel of the inner width:
//
//   x | z = ssm_in · h                       x, z: d_inner each
//   x = silu(conv(x) + conv_bias)            a causal depthwise convolution
//                                            of conv_taps taps per channel
//   dt | B | C = ssm_x · x                   dt: dt_rank; B, C: d_state
//   (Jamba, Falcon Mamba) dt, B, C = rms_norm(dt) * ssm_dt_norm, ... (no
//                                    weight where the file has none)
//   dt = ssm_dt · dt + dt_bias               d_inner
//   per channel i: Δ = softplus(dt[i])
//     state[i][s] = state[i][s] · exp(Δ · A[i][s]) + B[s] · (x[i] · Δ)
//     y[i] = state[i] · C + x[i] · D[i]
//   out = ssm_out · (y * silu(z))
//
// Each sequence keeps the convolution's last conv_taps - 1 inputs and the
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

class HParamReader;
class KvCache;
class TensorVisitor;

struct MambaWeights {
  kernels::WeightView in_proj, x_proj, dt_proj, out_proj;  // ssm_in, ssm_x, ssm_dt, ssm_out
  float in_scale = 1, out_scale = 1;                       // ssm_in.scale, ssm_out.scale
  std::vector<float> conv, conv_bias;                      // ssm_conv1d [d_inner][taps], bias
  std::vector<float> dt_bias, d;                           // [d_inner] each
  std::vector<float> a;                                    // ssm_a [d_inner][d_state]
  std::vector<float> dt_norm, b_norm, c_norm;              // Jamba's, or empty

  // blk.N.ssm_{in, conv1d, x, dt, a, d, out} as llama.cpp's mamba loader;
  // with `bcdt_norms`, ssm_{dt,b,c}_norm.weight too (Jamba, required).
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, bool bcdt_norms);
};

// ARCH.ssm.{conv_kernel, inner_size, state_size, time_step_rank} (required)
// and ssm.dt_b_c_rms, checked: llama.cpp runs an inner width of 2 n_embd only.
void read_mamba_hparams(const HParamReader& keys, ModelHParams& hp);

// The state one layer keeps per sequence, in floats: the convolution's
// inputs, then the scan's [d_inner][d_state].
inline int64_t mamba_state_width(const ModelHParams& hp) {
  return (hp.ssm.conv_taps - 1) * hp.ssm.d_inner + hp.ssm.d_inner * hp.ssm.d_state;
}

// out[r] = mamba(in[r]) for the rows in order, each sequence's state
// advanced row by row: in and out [rows][n_embd].
void mamba(const MambaWeights& w, const ModelHParams& hp, int64_t layer,
           std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx, ConstTensor in,
           Tensor out);

}  // namespace cortiq
