// Zhipu's GLM-4.5 / GLM-4.5-Air / GLM-4.6 / GLM-4.7 (`glm4moe`): a pre-norm
// decoder whose layers after the first few have a mixture of experts with
// DeepSeek V3's routing:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     Q/K/V biases, optional per-head
//                                                 Q/K RMS norms before RoPE;
//                                                 NeoX RoPE on part of each head
//     h  = rms_norm(x) * post_attention_norm
//     x += layer < leading_dense_block_count ? ffn(h)         dense SwiGLU, n_ff wide
//                                            : moe(h) + shared(h)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The router as the file says (llama.cpp's defaults: sigmoid gating, no
// renormalization, no scale): the correction bias exp_probs_b (required)
// chooses the experts; the shared expert is expert_shared_count experts
// wide and always on. Scores are scaled by 1/sqrt(head size) whatever
// attention.scale says. With rope.dimension_sections whose first two are
// set (GLM-4.5V) llama.cpp runs M-RoPE: for text, NeoX RoPE with the extra
// section's pairs unturned.
//
// Multi-token prediction: block_count counts the trunk and the
// nextn_predict_layers MTP layers after it (one on GLM-4.5). Each is a full
// layer plus its nextn.* tensors (blocks/nextn.hpp); bound and checked, not
// run, as llama.cpp decodes without an MTP draft. A file whose MTP layers
// were left out (no blk.N.nextn.eh_proj) runs the trunk the same.
#include <iterator>
#include <memory>

#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/arch_spec.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/nextn.hpp"
#include "model/decoder_model.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

constexpr AttentionTensors kAttention{.qk_norm = QkNorm::optional};
constexpr MoeTensors kExperts{
    .shared_expert = SharedExpert::always, .selection_bias = true, .selection_bias_required = true};
constexpr std::string_view kFfnNorm = "post_attention_norm.weight";

struct MtpLayer {
  PreNormMoeLayer block;
  NextnTensors nextn;
};

struct Glm4MoeWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;
  std::vector<MtpLayer> mtp;  // bound, not run

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(v, hp, il, kAttention, kExperts, kFfnNorm);
    }
    if (hp.mtp_layers.empty()) return;
    if (!v.has(layer_tensor_name(hp.n_layer, "nextn.eh_proj.weight"), /*written=*/true)) return;
    const ModelHParams all = hp.with_mtp_layers();
    ScalelessVisitor no_scales(v);
    for (int64_t il = hp.n_layer; il < std::ssize(all.layers); ++il) {
      MtpLayer& layer = mtp.emplace_back();
      layer.block.visit(no_scales, all, il, kAttention, kExperts, kFfnNorm);
      layer.nextn.visit(no_scales, hp, il);
    }
  }
};

class Glm4MoeModel final : public FamilyModel<Glm4MoeWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits);
  }
};

void read_glm4moe(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  hp.n_layer_dense_lead = keys.uint_or("leading_dense_block_count", 0);
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  // llama.cpp's graph adds the shared expert whatever its count; with none
  // its FFN of missing matrices would add silu(h).
  const int64_t n_shared = keys.required_uint("expert_shared_count");
  if (n_shared <= 0) keys.invalid("expert_shared_count must be positive");
  hp.n_ff_shared_expert = hp.n_ff_expert * n_shared;
  hp.router.gating = read_expert_gating(keys, RouterGating::sigmoid);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
  if (keys.has("rope.dimension_sections")) {
    const auto sections = keys.per_layer_uint("rope.dimension_sections", 4, 0);
    if (sections[0] > 0 && sections[1] > 0) {
      for (size_t i = 0; i < 4; ++i) hp.rope.mrope_sections[i] = static_cast<int32_t>(sections[i]);
      hp.rope_local = hp.rope;
    }
  }
}

// GLM-4.5-Air's shape in small: half of each head rotated, the first layer
// dense, four experts (two per token) n_ff wide with one shared, sigmoid
// routing renormalized and scaled by 2.5 (GLM-4.5's routed scaling factor),
// and one MTP layer after the trunk.
void write_glm4moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "glm4moe.";
  int64_t rot = (g.resolved_head_dim() / 2) & ~int64_t{1};
  if (rot == 0) rot = g.resolved_head_dim();
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count") kv.value = u32_value(rot);
    if (kv.key == p + "block_count") kv.value = u32_value(g.n_layer + 1);
  }
  keys.push_back({p + "nextn_predict_layers", u32_value(1)});
  keys.push_back({p + "leading_dense_block_count", u32_value(1)});
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "expert_count", u32_value(g.n_expert > 0 ? g.n_expert : 4)});
  keys.push_back({p + "expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : 2)});
  keys.push_back({p + "expert_shared_count", u32_value(1)});
  keys.push_back({p + "expert_gating_func", u32_value(2)});
  keys.push_back({p + "expert_weights_norm", gguf::Value(true)});
  keys.push_back({p + "expert_weights_scale", gguf::Value(2.5f)});
}

// GLM-4.5's checkpoints have Q/K/V biases.
constexpr std::string_view kGlm4MoeOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kGlm4MoeFamily{.arch = "glm4moe",
                            .neox_rope = true,
                            .make = make_model<Glm4MoeModel>,
                            .read_hparams = read_glm4moe,
                            .tensors = tensors_of<Glm4MoeWeights>,
                            .write_hparams = write_glm4moe,
                            .mtp_layers = true,
                            .converted_optional = kGlm4MoeOptional};

}  // namespace cortiq
