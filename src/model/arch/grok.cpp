// xAI's Grok-1 and Grok-2 (`grok`): a pre-norm decoder with norms after
// the attention and after the feed-forward branch, capped attention
// scores, and a mixture of GeGLU experts (Grok-2: plus a dense GeGLU FFN):
//
//   x = token_embd[token] * embedding_scale
//   for each layer:
//     r  = x + rms_norm(attention(rms_norm(x) * attn_norm)) * attn_output_norm
//            scores: cap * tanh(q.k * output_scale / cap), no other scale; NeoX RoPE
//     h  = rms_norm(r) * ffn_norm
//     f  = moe(h)                              softmax router, renormalized
//     f  = (ffn(h) + f) * sqrt(2)/2             when the layer has ffn_up (Grok-2)
//     x  = r + rms_norm(f) * post_norm         layer_output_norm, or post_ffw_norm
//   logits = output(rms_norm(x) * output_norm) * logit_scale, then the
//            final softcap when final_logit_softcapping is set
//
// llama.cpp's defaults for the multipliers (old files carry none):
// embedding_scale 78.38367176906169, attention.output_scale
// 0.08838834764831845, attn_logit_softcapping 30, logit_scale
// 0.5773502691896257, no final softcap, YaRN's beta_fast 8; it reads
// router_logit_softcapping and attention.temperature_length and uses
// neither. Experts expert_feed_forward_length wide (or n_ff), their gate
// optional (gelu(up) without it).
#include <cmath>
#include <memory>

#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct GrokLayer {
  std::vector<float> attn_norm;
  AttentionWeights attn;
  std::vector<float> attn_out_norm;
  std::vector<float> ffn_norm;
  bool has_dense = false;  // Grok-2's dense FFN (llama.cpp: when ffn_up is there)
  FfnWeights dense;
  MoeWeights moe;
  std::vector<float> post_norm;
};

struct GrokWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<GrokLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    const auto norm = [&](std::vector<float>& w, int64_t il, std::string_view name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      GrokLayer& layer = layers.emplace_back();
      norm(layer.attn_norm, il, "attn_norm.weight");
      layer.attn.visit(v, hp, il, {});
      norm(layer.attn_out_norm, il, "attn_output_norm.weight");
      norm(layer.ffn_norm, il, "ffn_norm.weight");
      // llama.cpp decides by ffn_up; gen-model writes Grok-2's dense FFN.
      layer.has_dense = v.has(layer_tensor_name(il, "ffn_up.weight"), /*written=*/true);
      if (layer.has_dense) layer.dense.visit(v, hp, il, {.scales_applied = false});
      layer.moe.visit(v, hp, il, {.gate_optional = true, .activation = ExpertActivation::geglu});
      const bool output_norm = v.has(layer_tensor_name(il, "layer_output_norm.weight"), false);
      norm(layer.post_norm, il, output_norm ? "layer_output_norm.weight" : "post_ffw_norm.weight");
    }
  }
};

class GrokModel final : public FamilyModel<GrokWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const Tensor dense_out = ctx.backend.scratch(ctx.buffers.parallel, x.size());
    // ggml_scale's float of llama.cpp's std::sqrt(2) / 2.
    const auto half_sqrt2 = static_cast<float>(std::sqrt(2.0) / 2.0);
    for (const int64_t il : ctx.stage.layers()) {
      const GrokLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      rms_norm(ctx, h, branch, layer.attn_out_norm, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      moe_ffn(layer.moe, h, il, n, ctx, normed, branch);
      if (layer.has_dense) {
        ffn(layer.dense, FfnActivation::geglu, h, il, n, ctx, normed, dense_out);
        ctx.backend.add(branch, dense_out);  // (dense + moe) * sqrt(2) / 2
        ctx.backend.scale(branch, half_sqrt2);
      }
      rms_norm(ctx, h, branch, layer.post_norm, branch);
      ctx.backend.add(x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }
};

void read_grok(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  require_whole_rotation(keys, hp);
  read_expert_hparams(keys, hp, /*width_key=*/false, /*shared_expert=*/false);
  if (const int64_t width = keys.uint_or("expert_feed_forward_length", 0); width > 0) {
    hp.n_ff_expert = width;
  }
  hp.router.normalize = true;
  hp.embedding_scale = keys.float_or("embedding_scale", 78.38367176906169f);
  hp.logit_scale = keys.float_or("logit_scale", 0.5773502691896257f);
  if (hp.logit_scale == 0.0f) keys.invalid(keys.key("logit_scale") + " 0 would zero every logit");
  hp.final_softcap = keys.float_or("final_logit_softcapping", 0.0f);
  hp.attn_softcap = keys.float_or("attn_logit_softcapping", 30.0f);
  if (!(hp.attn_softcap > 0.0f)) keys.invalid("attn_logit_softcapping must be positive");
  hp.attn_softcap_scale =
      keys.float_or("attention.output_scale", 0.08838834764831845f) / hp.attn_softcap;
  hp.attention_scale = 1.0f;  // the scores' only scale is inside the cap
  read_yarn_keys(keys, hp.rope, {.beta_fast_default = 8.0f, .ext_and_attn = true});
  hp.rope_local = hp.rope;
}

// Grok-2's shape in small: a dense FFN beside the experts, the multipliers
// its converter writes (llama.cpp's defaults) and a final softcap.
void write_grok(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "grok.";
  write_expert_counts(g, "grok", keys);
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "embedding_scale", gguf::Value(78.38367176906169f)});
  keys.push_back({p + "logit_scale", gguf::Value(0.5773502691896257f)});
  keys.push_back({p + "attention.output_scale", gguf::Value(0.08838834764831845f)});
  keys.push_back({p + "attn_logit_softcapping", gguf::Value(30.0f)});
  keys.push_back({p + "final_logit_softcapping", gguf::Value(50.0f)});
}

}  // namespace

// llama.cpp shapes attn_q and attn_output [n_embd, n_embd]: heads must tile n_embd.
const Family kGrokFamily{.arch = "grok",
                         .neox_rope = true,
                         .make = make_model<GrokModel>,
                         .read_hparams = read_grok,
                         .tensors = tensors_of<GrokWeights>,
                         .write_hparams = write_grok,
                         .fixed_head_dim = true};

}  // namespace cortiq
