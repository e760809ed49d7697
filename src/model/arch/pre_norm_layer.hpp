// The Llama-shaped layer several families share: an RMS pre-norm before
// each branch, each branch added back to the residual stream:
//
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn(rms_norm(x) * ffn_norm)
//
// The family says which tensors its attention and FFN read and which
// activation the FFN applies.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/activations.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/ffn.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

struct PreNormLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  FfnWeights ffn;

  // blk.N.attn_norm.weight, the attention's tensors, blk.N.ffn_norm.weight
  // and the FFN's.
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il, AttentionTensors attention,
             FfnTensors feed_forward) {
    v.vector(attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
    attn.visit(v, hp, il, attention);
    v.vector(ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd, TensorKind::norm);
    ffn.visit(v, hp, il, feed_forward);
  }

  // Runs layer `il` over the stream's rows.
  void run(FfnActivation activation, const ModelHParams& hp, int64_t il, const LayerStream& s,
           KvCache& cache, ForwardContext& ctx) const {
    rms_norm(hp, s.x, attn_norm, s.normed);
    attention(attn, hp, il, s.pass, cache, ctx, s.normed, s.branch);
    kernels::add_inplace(s.x, s.branch);
    rms_norm(hp, s.x, ffn_norm, s.normed);
    cortiq::ffn(ffn, activation, hp, il, static_cast<int64_t>(s.pass.rows.size()), ctx, s.normed,
                s.branch);
    kernels::add_inplace(s.x, s.branch);
  }
};

}  // namespace cortiq
