// The Llama-shaped layer several families share: an RMS pre-norm before
// each branch, each branch added back to the residual stream:
//
//   x += attention(rms_norm(x) * attn_norm)
//   x += ffn(rms_norm(x) * ffn_norm)          PreNormLayer
//     or moe(rms_norm(x) * ffn_norm)          PreNormMoeLayer
//
// The family says which tensors its attention and FFN read and which
// activation the FFN applies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/activations.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
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
    rms_norm(ctx, hp, s.x, attn_norm, s.normed);
    attention(attn, hp, il, s.pass, cache, ctx, s.normed, s.branch);
    ctx.backend.add(s.x, s.branch);
    rms_norm(ctx, hp, s.x, ffn_norm, s.normed);
    cortiq::ffn(ffn, activation, hp, il, static_cast<int64_t>(s.pass.rows.size()), ctx, s.normed,
                s.branch);
    ctx.backend.add(s.x, s.branch);
  }
};

// The same layer with a mixture of experts for its FFN (Qwen-MoE, OLMoE,
// GPT-OSS, ERNIE-MoE, Hunyuan-MoE); the family names the FFN's norm
// (GPT-OSS: post_attention_norm). The first hp.n_layer_dense_lead layers
// (ARCH.leading_dense_block_count) have a dense SwiGLU FFN n_ff wide instead.
struct PreNormMoeLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm;
  FfnWeights dense;  // the leading dense layers
  MoeWeights moe;    // the others

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il, AttentionTensors attention,
             MoeTensors experts, std::string_view ffn_norm_name = "ffn_norm.weight",
             FfnTensors dense_ffn = {.scales_applied = false}) {
    v.vector(attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
    attn.visit(v, hp, il, attention);
    v.vector(ffn_norm, layer_tensor_name(il, ffn_norm_name), hp.n_embd, TensorKind::norm);
    if (hp.layer_has_experts(il)) {
      moe.visit(v, hp, il, experts);
    } else {
      dense.visit(v, hp, il, dense_ffn);
    }
  }

  void run(const ModelHParams& hp, int64_t il, const LayerStream& s, KvCache& cache,
           ForwardContext& ctx) const {
    const auto n_rows = static_cast<int64_t>(s.pass.rows.size());
    ConstTensor router_in;  // the layer's input, when the router reads it
    if (hp.layer_has_experts(il) && moe.router_input == RouterInput::layer_input) {
      const Tensor copy = ctx.backend.scratch(ctx.buffers.parallel, s.x.size());
      ctx.backend.copy_rows(s.x, 0, copy, 0, s.x.size(), 1);
      router_in = copy;
    }
    rms_norm(ctx, hp, s.x, attn_norm, s.normed);
    attention(attn, hp, il, s.pass, cache, ctx, s.normed, s.branch);
    ctx.backend.add(s.x, s.branch);
    rms_norm(ctx, hp, s.x, ffn_norm, s.normed);
    if (hp.layer_has_experts(il)) {
      moe_ffn(moe, hp, il, n_rows, ctx, s.normed, s.branch, router_in);
    } else {
      cortiq::ffn(dense, FfnActivation::swiglu, hp, il, n_rows, ctx, s.normed, s.branch);
    }
    ctx.backend.add(s.x, s.branch);
  }
};

// A pre-norm family's forward: the embedding, every layer (its run() given
// `layer_args` first: a PreNormLayer's FFN activation), the head. Weights
// has embedding, rope, layers and head.
template <class Weights, class... LayerArgs>
void run_pre_norm_layers(const Weights& w, const ModelHParams& h, std::span<const BatchRow> rows,
                         std::span<const int32_t> cells, KvCache& cache, ForwardContext& ctx,
                         std::span<float> logits, LayerArgs... layer_args) {
  const LayerStream s = start_layers(h, rows, cells, ctx, w.embedding, w.rope);
  for (const int64_t il : ctx.stage.layers()) {
    w.layers[static_cast<size_t>(il)].run(layer_args..., h, il, s, cache, ctx);
  }
  w.head.apply(h, rows, s.x, ctx, logits);
}

// The model of a family whose forward is run_pre_norm_layers over its
// Weights (its layers PreNormMoeLayer, or PreNormLayer without arguments).
template <class Weights>
class PreNormModel final : public FamilyModel<Weights> {
 public:
  using FamilyModel<Weights>::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(this->w_, this->hparams_, rows, cells, cache, ctx, logits);
  }
};

}  // namespace cortiq
