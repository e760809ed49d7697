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
#include "kv/batch.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

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

// Whether B and C come in groups (Mamba-2 and its hybrids, Gated DeltaNet's
// key heads) or once for every head, with ssm.group_count 0 (PLaMo-2, whose
// graph llama.cpp asserts that for).
enum class SsmGroups : uint8_t { at_least_one, none };

// ARCH.ssm.{conv_kernel, inner_size, state_size, time_step_rank,
// group_count} (all required, as llama.cpp reads them), checked.
void read_ssm_hparams(const HParamReader& keys, ModelHParams& hp,
                      SsmGroups groups = SsmGroups::at_least_one);

// Mamba-2's selective scan (ggml_ssm_scan with one decay per head) of
// heads [h0, h1) of one row, as the header's formula: x [n_head][head_dim],
// B and C [n_group][d_state], dt [n_head] before its bias; the state
// [n_head][head_dim][d_state] advanced, y [n_head][head_dim] written.
// Shared by PLaMo-2's Mamba (one group).
struct SelectiveScanHeads {
  std::span<const float> dt_bias, a, d;  // [n_head] each
  int64_t n_head = 0, head_dim = 0, d_state = 0, n_group = 1;
};
void selective_scan_heads(const SelectiveScanHeads& p, const float* x, const float* B,
                          const float* C, const float* dt, float* state, float* y, size_t h0,
                          size_t h1);

// The state one Mamba-2 layer keeps per sequence, in floats: the
// convolution's inputs, then the scan's [n_head][head_dim][d_state].
inline int64_t mamba2_state_width(const ModelHParams& hp) {
  return (hp.ssm.conv_taps - 1) * hp.ssm.conv_width() + hp.ssm.d_inner * hp.ssm.d_state;
}

// out[r] = mamba2(in[r]) for the rows in order, each sequence's state
// advanced row by row: in and out [rows][n_embd].
void mamba2(const Mamba2Weights& w, const ModelHParams& hp, int64_t layer,
            std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx, ConstTensor in,
            Tensor out);

}  // namespace cortiq
