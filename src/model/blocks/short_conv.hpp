// LFM2's gated short convolution, the recurrent layers between its attention
// layers (llama.cpp's build_shortconv_block):
//
//   b | c | x = in_proj · h                three n_embd-wide parts
//   y_t = c_t * Σ_k kernel[k] · (b * x)_{t-L+1+k}   a causal depthwise
//                                          convolution of L taps per channel
//   out = out_proj · y
//
// The layer's recurrent state is each channel's last L - 1 inputs b * x of
// its sequence ([n_embd][L - 1], zero for an empty sequence), kept in the
// KV cache (KvCache::state), so a decode step needs no earlier rows.
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

struct ShortConvWeights {
  std::vector<float> kernel;  // shortconv.conv [n_embd][L]
  kernels::WeightView in_proj, out_proj;

  // blk.N.shortconv.{conv, in_proj, out_proj}.weight, hp.shortconv_taps
  // taps.
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer);
};

// The state one short-convolution layer keeps per sequence, in floats.
inline int64_t short_conv_state_width(const ModelHParams& hp) {
  return hp.n_embd * (hp.shortconv_taps - 1);
}

// out[r] = short_conv(in[r]) for the rows in order, each sequence's state
// advanced row by row: in and out [rows][n_embd].
void short_conv(const ShortConvWeights& w, const ModelHParams& hp, int64_t layer,
                std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx, ConstTensor in,
                Tensor out);

}  // namespace cortiq
