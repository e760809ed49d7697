// Mamba-2's selective state space layer (llama.cpp's build_mamba2_layer):
//
//   z | xBC | dt = ssm_in · h
//   xBC = silu(conv(xBC) + conv_bias)        a causal depthwise convolution
//                                            of conv_taps taps per channel
//   x | B | C = xBC                          x: n_head heads of head_dim;
//                                            B, C: n_group groups of d_state
//   per head h (group g = h / (n_head / n_group)):
//     Δ = softplus(dt[h] + dt_bias[h]),  a = exp(Δ · A[h])
//     state[h][i][:] = state[h][i][:] · a + B[g] · (x[h][i] · Δ)
//     y[h][i] = state[h][i] · C[g] + x[h][i] · D[h]
//   y = rms_norm per group(silu(z) * y) * ssm_norm   (silu(z) * y without ssm_norm)
//   out = ssm_out · y
//
// Each sequence keeps the convolution's last conv_taps - 1 inputs and the
// scan's state (KvCache::state), so a decode step needs no earlier rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"
#include "runtime/batch.hpp"

namespace cortiq {

class KvCache;
class TensorVisitor;

struct Mamba2Weights {
  kernels::WeightView in_proj, out_proj;  // ssm_in, ssm_out
  float in_scale = 1, out_scale = 1;      // their NAME.scale, 1 when absent
  std::vector<float> conv, conv_bias;     // ssm_conv1d [conv_width][taps], its bias
  std::vector<float> dt_bias, a, d;       // [n_head] each
  std::vector<float> norm;                // ssm_norm [n_group][d_inner / n_group]

  // blk.N.ssm_{in, conv1d, dt, a, d, norm, out} as llama.cpp's mamba2
  // loader; with `norm_optional`, a file without ssm_norm skips the grouped
  // norm (Falcon-H1).
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, bool norm_optional = false);
};

class HParamReader;

// ARCH.ssm.{conv_kernel, inner_size, state_size, time_step_rank,
// group_count} (all required, as llama.cpp reads them), checked.
void read_ssm_hparams(const HParamReader& keys, ModelHParams& hp);

// The state one Mamba-2 layer keeps per sequence, in floats: the
// convolution's inputs, then the scan's [n_head][head_dim][d_state].
inline int64_t mamba2_state_width(const ModelHParams& hp) {
  return (hp.ssm.conv_taps - 1) * hp.ssm.conv_width() + hp.ssm.d_inner * hp.ssm.d_state;
}

// out[r] = mamba2(in[r]) for the rows in order, each sequence's state
// advanced row by row: in and out [rows][n_embd].
void mamba2(const Mamba2Weights& w, const ModelHParams& hp, int64_t layer,
            std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
            std::span<const float> in, std::span<float> out);

}  // namespace cortiq
