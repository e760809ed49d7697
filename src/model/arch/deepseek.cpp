// DeepSeek's mixture-of-experts decoders: DeepSeekMoE (`deepseek`,
// deepseek-moe-16b) and DeepSeek V2/V3 (`deepseek2`: also Kimi K2, GLM-4.7
// Lite, Mistral Large 3 and the other files converted as deepseek2).
// llama.cpp runs two more families on this graph, each in its own file
// through deepseek.hpp: `mistral4` (mistral4.cpp: deepseek2 under Mistral 4's
// name) and rednote's dots.llm1 (dots1.cpp: DeepSeek V3's experts under
// plain attention).
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)
//     h  = rms_norm(x) * ffn_norm
//     x += layer < leading_dense_block_count ? ffn(h)      dense SwiGLU
//                                            : moe(h) + shared(h)
//   logits = output(rms_norm(x) * output_norm)        output: the embedding if absent
//
// deepseek:  plain attention (RoPE in adjacent pairs), a softmax router
//            whose weights are not renormalized, times
//            expert_weights_scale; expert_shared_count experts always on,
//            as one FFN of that many experts' width.
// deepseek2: multi-head latent attention (blocks/latent_attention), in
//            the absorbed form when the file has attn_k_b / attn_v_b
//            (key_length_mla), so the cache holds one latent per token;
//            the router as the file says: softmax (V2) or sigmoid (V3)
//            gating, the correction bias exp_probs_b, grouped top-k,
//            renormalized or not, scaled. Scores are scaled by
//            mscale^2 / sqrt(nope + rope), mscale YaRN's magnitude
//            correction as llama.cpp's deepseek2 graph computes it.
//            Mistral Large 3: Llama 4's attention temperature on every
//            layer's queries (attention.temperature_scale and _length).
// dots1:     plain attention with per-head Q/K RMS norms (NeoX RoPE), the
//            output matrix its own; the router as deepseek2's (the gating
//            key required: llama.cpp has no default for dots1).
#include <algorithm>
#include <cmath>
#include <memory>

#include "model/arch/arch.hpp"
#include "model/arch/deepseek.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/latent_attention.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

bool is_dots1(const ModelHParams& hp) {
  return hp.arch == "dots1";
}

// deepseek2 and mistral4 (read_deepseek2 requires a positive latent rank).
bool is_v2(const ModelHParams& hp) {
  return hp.kv_lora_rank > 0;
}

struct DeepseekLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;          // deepseek
  LatentAttentionWeights latent;  // deepseek2
  std::vector<float> ffn_norm;
  FfnWeights dense;  // the leading dense layers
  MoeWeights moe;    // the others
};

struct DeepseekWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<DeepseekLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, is_dots1(hp) ? OutputMatrix::own : OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      DeepseekLayer& layer = layers.emplace_back();
      v.vector(layer.attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (is_v2(hp)) {
        layer.latent.visit(v, hp, il);
      } else {
        layer.attn.visit(v, hp, il, {.qk_norm = is_dots1(hp) ? QkNorm::required : QkNorm::none});
      }
      v.vector(layer.ffn_norm, layer_tensor_name(il, "ffn_norm.weight"), hp.n_embd,
               TensorKind::norm);
      if (il < hp.n_layer_dense_lead) {
        layer.dense.visit(v, hp, il, {.scales_applied = false});
      } else {
        layer.moe.visit(v, hp, il,
                        {.shared_expert = SharedExpert::always,
                         .selection_bias = is_v2(hp) || is_dots1(hp),
                         .fused_gate_up = is_v2(hp)});
      }
    }
  }
};

class DeepseekModel final : public FamilyModel<DeepseekWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const DeepseekLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      if (is_v2(h)) {
        latent_attention(layer.latent, h, il, pass, cache, ctx, normed, branch);
      } else {
        attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      }
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      if (il < h.n_layer_dense_lead) {
        ffn(layer.dense, FfnActivation::swiglu, h, il, n, ctx, normed, branch);
      } else {
        moe_ffn(layer.moe, h, il, n, ctx, normed, branch);
      }
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

// The score scale of llama.cpp's deepseek2 graph: YaRN's mscale (with the
// file's yarn_log_multiplier, which its converter wrote times 0.1) squared,
// over sqrt of a head's query width. With a log multiplier, llama.cpp's
// context also resolves deepseek2's mscale to mscale_all_dim, so their
// ratio in the RoPE's attn_factor is 1 (read_rope's is not).
void set_deepseek2_scales(const HParamReader& keys, ModelHParams& hp, int64_t head_qk) {
  const float log_mul = keys.float_or("rope.scaling.yarn_log_multiplier", 0.0f) / 0.1f;
  RopeHParams& rope = hp.rope;
  const float log_factor = std::log(1.0f / rope.freq_scale);
  if (rope.ext_factor != 0.0f && log_mul != 0.0f) {
    rope.attn_factor =
        1.0f / (1.0f + 0.1f * log_factor) * keys.float_or("rope.scaling.attn_factor", 1.0f);
  }
  const float attn_factor_org = rope.attn_factor * (1.0f + 0.1f * log_factor);
  const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * log_factor);
  hp.attention_scale = mscale * mscale / std::sqrt(static_cast<float>(head_qk));
}

}  // namespace

namespace deepseek_graph {

// What every family on the graph reads (deepseek nothing more): the dense lead, the
// experts' width (required), the shared experts as one FFN of
// expert_shared_count experts' width, the weights' scale.
void read_common(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  hp.n_layer_dense_lead = keys.uint_or("leading_dense_block_count", 0);
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  const int64_t n_shared = keys.required_uint("expert_shared_count");
  if (n_shared <= 0) keys.invalid("expert_shared_count must be positive");
  hp.n_ff_shared_expert = hp.n_ff_expert * n_shared;
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
}

void read_latent(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  hp.router.gating = read_expert_gating(keys, RouterGating::softmax);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  // Mistral Large 3: Llama 4's attention temperature in every layer,
  // stepping every attention.temperature_length positions.
  const float temperature = keys.float_or("attention.temperature_scale", 0.0f);
  if (temperature != 0.0f) {
    const int64_t length = keys.uint_or("attention.temperature_length", 0);
    if (length <= 0) {
      keys.invalid("attention.temperature_scale needs attention.temperature_length > 0");
    }
    hp.attn_temperature = {.scale = temperature, .floor_scale = length};
  }
  hp.q_lora_rank = keys.uint_or("attention.q_lora_rank", 0);
  hp.kv_lora_rank = keys.required_uint("attention.kv_lora_rank");
  if (hp.kv_lora_rank <= 0) keys.invalid("attention.kv_lora_rank must be positive");
  hp.mla_head_dim_k = keys.uint_or("attention.key_length_mla", 0);
  hp.mla_head_dim_v = keys.uint_or("attention.value_length_mla", 0);
  if ((hp.mla_head_dim_k == 0) != (hp.mla_head_dim_v == 0)) {
    keys.invalid("attention.key_length_mla and value_length_mla come together");
  }
  const int64_t rope = hp.rope.n_dims;
  const int64_t head_qk = hp.mla_head_dim_k > 0 ? hp.mla_head_dim_k : hp.head_dim_k;
  if (head_qk <= rope) keys.invalid("a head's key must be wider than its rope part");
  for (LayerSpec& layer : hp.layers) {
    if (layer.n_head != hp.n_head) keys.invalid("deepseek2 needs the same heads in every layer");
    if (hp.mla_head_dim_k == 0) {
      // Expanded: every head's key and value cached, as llama.cpp's non-MLA path.
      if (layer.n_head_kv != layer.n_head) {
        keys.invalid("deepseek2 without key_length_mla needs one KV head per head");
      }
      continue;
    }
    // Absorbed: the cache row is the latent and the rope key, one "head".
    if (layer.head_dim_k != hp.kv_lora_rank + rope || layer.head_dim_v != hp.kv_lora_rank) {
      keys.invalid(
          "attention.key_length / value_length must be kv_lora_rank + rope and "
          "kv_lora_rank in a latent-attention file");
    }
    layer.n_head_kv = 1;
    layer.values_in_keys = true;
  }
  hp.n_head_kv = hp.mla_head_dim_k > 0 ? 1 : hp.n_head_kv;
  set_deepseek2_scales(keys, hp, head_qk);
}

// gen-model: four experts (two per token) n_ff wide, one shared expert, the
// first layer dense.
void write_experts(const ModelGeometry& g, std::string_view arch,
                   std::vector<gguf::KeyValue>& keys) {
  const std::string prefix = std::string(arch) + ".";
  keys.push_back({prefix + "leading_dense_block_count", u32_value(1)});
  keys.push_back({prefix + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({prefix + "expert_count", u32_value(g.n_expert > 0 ? g.n_expert : 4)});
  keys.push_back(
      {prefix + "expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
  keys.push_back({prefix + "expert_shared_count", u32_value(1)});
}

// Latent attention in the absorbed form, in small (query rank 3/4 n_embd,
// latent rank n_embd / 4, a head's key head_dim + head_dim / 2 with the rope
// half, its value head_dim), and renormalized experts.
void write_latent_moe(const ModelGeometry& g, std::string_view arch,
                      std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  const int64_t head = g.resolved_head_dim(), rope = head / 2, kv_rank = g.n_embd / 4;
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "attention.head_count_kv") kv.value = u32_value(1);
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rope);
  }
  write_experts(g, arch, keys);
  keys.push_back({p + "attention.q_lora_rank", u32_value(g.n_embd * 3 / 4)});
  keys.push_back({p + "attention.kv_lora_rank", u32_value(kv_rank)});
  keys.push_back({p + "attention.key_length", u32_value(kv_rank + rope)});
  keys.push_back({p + "attention.value_length", u32_value(kv_rank)});
  keys.push_back({p + "attention.key_length_mla", u32_value(head + rope)});
  keys.push_back({p + "attention.value_length_mla", u32_value(head)});
  keys.push_back({p + "expert_weights_norm", gguf::Value(true)});
}

std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder) {
  return make_model<DeepseekModel>(std::move(hparams), binder);
}

std::vector<TensorSpec> tensors(const ModelHParams& hparams) {
  return tensors_of<DeepseekWeights>(hparams);
}

}  // namespace deepseek_graph

namespace {

using namespace deepseek_graph;

void write_deepseek(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_experts(g, "deepseek", keys);
  keys.push_back({"deepseek.expert_weights_scale", gguf::Value(1.0f)});
}

// DeepSeek V3: sigmoid routing with the correction bias, two expert groups
// of which one is used, the weights scaled by 2.5.
void write_deepseek2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_latent_moe(g, "deepseek2", keys);
  keys.push_back({"deepseek2.expert_gating_func", u32_value(2)});
  keys.push_back({"deepseek2.expert_weights_scale", gguf::Value(2.5f)});
  keys.push_back({"deepseek2.expert_group_count", u32_value(2)});
  keys.push_back({"deepseek2.expert_group_used_count", u32_value(1)});
}

}  // namespace

const Family kDeepseekFamily{.arch = "deepseek",
                             .neox_rope = false,
                             .make = deepseek_graph::make,
                             .read_hparams = deepseek_graph::read_common,
                             .tensors = deepseek_graph::tensors,
                             .write_hparams = write_deepseek};
const Family kDeepseek2Family{.arch = "deepseek2",
                              .neox_rope = false,
                              .make = deepseek_graph::make,
                              .read_hparams = deepseek_graph::read_latent,
                              .tensors = deepseek_graph::tensors,
                              .write_hparams = write_deepseek2,
                              .converted_optional = deepseek_graph::kConverted};

}  // namespace cortiq
