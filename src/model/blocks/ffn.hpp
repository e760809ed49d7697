// The gated feed-forward block (SwiGLU): RMS norm, then
// down(silu(gate(x)) * up(x)), added to the residual stream.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class WeightBinder;

struct GatedFfnWeights {
  std::vector<float> norm;  // ffn_norm
  kernels::WeightView gate, up, down;
  std::vector<float> gate_b, up_b, down_b;  // optional biases

  static GatedFfnWeights bind(const WeightBinder& binder, const ModelHParams& hp, int64_t layer);
};

// residual[r] += ffn(rms_norm(residual[r])) for n_rows rows.
void gated_ffn_block(const GatedFfnWeights& w, const ModelHParams& hp, int64_t n_rows,
                     ForwardContext& ctx, std::span<float> residual);

}  // namespace cortiq
