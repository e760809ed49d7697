// The self-attention block shared by the dense decoder families: RMS norm,
// Q/K/V projections (optional biases), optional per-head RMS norms on Q and
// K (qwen3), RoPE, the rows' keys and values into the cache, causal GQA
// attention over the cache, the output projection, and the residual add.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/weight_view.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"
#include "runtime/batch.hpp"

namespace cortiq {

class KvCache;
class WeightBinder;

struct AttentionWeights {
  std::vector<float> norm;  // attn_norm
  kernels::WeightView wq, wk, wv, wo;
  std::vector<float> bq, bk, bv, bo;  // empty when the family has none
  std::vector<float> q_norm, k_norm;  // per-head RMS norm weights, or empty

  // Binds blk.N.attn_* (biases and q/k norms when present).
  static AttentionWeights bind(const WeightBinder& binder, const ModelHParams& hp, int64_t layer);
};

// What every layer's attention shares within one forward pass.
struct AttentionPass {
  std::span<const BatchRow> rows;
  std::span<const int32_t> cells;  // each row's cache cell
  const kernels::RopeParams& rope;
  std::span<const float> rope_cache;  // [rows][rope.n_dims] from rope_cache()
};

// residual[r] += attention(rms_norm(residual[r])) for every row, layer `layer`.
void attention_block(const AttentionWeights& w, const ModelHParams& hp, int64_t layer,
                     const AttentionPass& pass, KvCache& cache, ForwardContext& ctx,
                     std::span<float> residual);

}  // namespace cortiq
