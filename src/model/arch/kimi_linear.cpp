// Moonshot's Kimi Linear (`kimi-linear`: Kimi-Linear-48B-A3B): three layers
// in four are Kimi Delta Attention (blocks/kimi_delta_attention.hpp), the
// fourth multi-head latent attention without RoPE; DeepSeek V3's experts:
//
//   x = token_embd[token]
//   for each layer:
//     x += recurrent ? kimi_delta_attention(rms_norm(x) * attn_norm)
//                    : latent_attention(rms_norm(x) * attn_norm)
//                        absorbed (attn_k_b, attn_v_b), the rope part of
//                        the query and the shared key left unrotated,
//                        scores by 1 / sqrt(key_length_mla)
//     h  = rms_norm(x) * ffn_norm
//     x += layer < leading_dense_block_count ? ffn(h)      dense SwiGLU
//                                            : moe(h) + shared(h)
//                        routed by expert_gating_func with the correction
//                        bias exp_probs_b, renormalized, times
//                        expert_weights_scale
//   logits = output(rms_norm(x) * output_norm)
//
// A layer is recurrent where attention.head_count_kv is 0 (llama.cpp's
// loader); the Delta Attention heads are the first layer's head count.
#include <cmath>
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/deepseek.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/kimi_delta_attention.hpp"
#include "model/blocks/latent_attention.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct KimiLinearLayer {
  std::vector<float> attn_norm, ffn_norm;
  KimiDeltaAttentionWeights kda;  // recurrent layers
  LatentAttentionWeights mla;     // the others
  FfnWeights dense;               // the leading dense layers
  MoeWeights moe;                 // the others

  // As llama.cpp's kimi-linear loader.
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il) {
    v.vector(attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
    if (hp.layer(il).is_recurrent()) {
      kda.visit(v, hp, il);
    } else {
      mla.visit(v, hp, il);
    }
    v.vector(ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd, TensorKind::norm);
    if (il < hp.n_layer_dense_lead) {
      dense.visit(v, hp, il, {.scales_applied = false});
    } else {
      moe.visit(v, hp, il,
                {.shared_expert = SharedExpert::always, .selection_bias_required = true});
    }
  }
};

struct KimiLinearWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;  // none: no layer rotates
  std::vector<KimiLinearLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own);
    for (int64_t il = 0; il < hp.n_layer; ++il) layers.emplace_back().visit(v, hp, il);
  }
};

class KimiLinearModel final : public FamilyModel<KimiLinearWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const KimiLinearLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      if (h.layer(il).is_recurrent()) {
        kimi_delta_attention(layer.kda, h, il, rows, cache, ctx, s.normed, s.branch);
      } else {
        latent_attention(layer.mla, h, il, s.pass, cache, ctx, s.normed, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
      rms_norm(ctx, h, s.x, layer.ffn_norm, s.normed);
      if (il < h.n_layer_dense_lead) {
        ffn(layer.dense, FfnActivation::swiglu, h, il, n, ctx, s.normed, s.branch);
      } else {
        moe_ffn(layer.moe, h, il, n, ctx, s.normed, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

// The latent attention layers: absorbed only (llama.cpp's converter splits
// kv_b; its graph's path for an unsplit one puts the key's parts in
// another order than the query's), one cached row of kv_lora_rank + rope
// values, no rotation. The query is one projection (llama.cpp's loader
// reads no q_lora_rank); value_length is not read either (the converter
// writes the model's head_dim there, 72 for Kimi-Linear-48B): the cache
// holds the latent, the value its first kv_lora_rank floats.
void read_kimi_attention(const HParamReader& keys, ModelHParams& hp) {
  hp.q_lora_rank = 0;
  hp.kv_lora_rank = keys.required_uint("attention.kv_lora_rank");
  hp.mla_head_dim_k = keys.required_uint("attention.key_length_mla");
  hp.mla_head_dim_v = keys.required_uint("attention.value_length_mla");
  const int64_t rope = hp.rope.n_dims;
  if (hp.kv_lora_rank <= 0 || hp.mla_head_dim_v <= 0) {
    keys.invalid("attention.kv_lora_rank and value_length_mla must be positive");
  }
  if (hp.mla_head_dim_k <= rope) {
    keys.invalid("attention.key_length_mla must be wider than rope.dimension_count");
  }
  hp.attention_scale = 1.0f / std::sqrt(static_cast<float>(hp.mla_head_dim_k));
  hp.n_head_kv = 1;
}

void read_kimi_linear(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_kimi_delta_attention_hparams(keys, hp);
  read_kimi_attention(keys, hp);
  const int64_t kda_state = kimi_delta_attention_state_width(hp);
  for (LayerSpec& layer : hp.layers) {
    layer.rope = RopeSlot::none;
    if (layer.n_head_kv == 0) {
      layer.n_head = 0;
      layer.state_width = kda_state;
      layer.recurrent = RecurrentKind::kimi_delta_attention;
      continue;
    }
    if (layer.n_head != hp.n_head) {
      keys.invalid("the latent attention layers need the first layer's head count");
    }
    if (layer.n_head_kv != 1 || layer.head_dim_k != hp.kv_lora_rank + hp.rope.n_dims) {
      keys.invalid(
          "an attention layer needs one KV head of key_length kv_lora_rank + rope (the "
          "latent cache)");
    }
    layer.head_dim_v = hp.kv_lora_rank;
    layer.values_in_keys = true;
  }
  // DeepSeek V3's experts (deepseek.hpp's reader), renormalized (llama.cpp's
  // graph passes true).
  deepseek_graph::read_common(keys, hp);
  hp.router.gating = read_expert_gating(keys, std::nullopt);
  hp.router.normalize = true;
}

// Kimi-Linear-48B's shape in small: every third layer (and the last) latent
// attention with a latent of n_embd / 4 and a head's key head_dim +
// head_dim / 2 (its unrotated "rope" half), the others Delta Attention with
// heads of head_dim and 4 taps; the first layer dense, then four experts
// (two per token) n_ff wide with one shared, sigmoid routing scaled by 2.446.
void write_kimi_linear(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "kimi-linear.";
  const int64_t head = g.resolved_head_dim(), rope = head / 2, kv_rank = g.n_embd / 4;
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rope);
  }
  write_u32_per_layer(
      p + "attention.head_count_kv", g.n_layer,
      [&](int64_t il) { return attends_in_small(g, il) ? 1 : 0; }, keys);
  keys.push_back({p + "ssm.conv_kernel", u32_value(4)});
  keys.push_back({p + "kda.head_dim", u32_value(head)});
  keys.push_back({p + "attention.kv_lora_rank", u32_value(kv_rank)});
  keys.push_back({p + "attention.key_length", u32_value(kv_rank + rope)});
  keys.push_back({p + "attention.value_length", u32_value(kv_rank)});
  keys.push_back({p + "attention.key_length_mla", u32_value(head + rope)});
  keys.push_back({p + "attention.value_length_mla", u32_value(head)});
  keys.push_back({p + "leading_dense_block_count", u32_value(1)});
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  write_expert_counts(g, "kimi-linear", keys);
  keys.push_back({p + "expert_shared_count", u32_value(1)});
  keys.push_back({p + "expert_gating_func", u32_value(2)});
  keys.push_back({p + "expert_weights_scale", gguf::Value(2.446f)});
}

}  // namespace

const Family kKimiLinearFamily{.arch = "kimi-linear",
                               .neox_rope = false,
                               .make = make_model<KimiLinearModel>,
                               .read_hparams = read_kimi_linear,
                               .tensors = tensors_of<KimiLinearWeights>,
                               .write_hparams = write_kimi_linear,
                               .layers_may_lack_parts = true};

}  // namespace cortiq
