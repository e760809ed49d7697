// OpenBMB's MiniCPM3 (`minicpm3`: MiniCPM3-4B): MiniCPM's scaled pre-norm
// decoder with multi-head latent attention (blocks/latent_attention) and
// SwiGLU:
//
//   x = token_embd[token] * 12
//   for each layer:
//     x += latent_attention(rms_norm(x) * attn_norm) * 1.4 / sqrt(n_layer)
//     x += down(silu(gate(h)) * up(h)) * 1.4 / sqrt(n_layer),
//          h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm) * 256 / n_embd
//                                         output.weight: the embedding if absent
//
// The three multipliers are constants of llama.cpp's graph (MiniCPM3-4B's
// scale_emb, scale_depth and dim_model_base), not read from the file. RoPE:
// NeoX pairs over the rope part of each head (rope.dimension_count), the
// scores scaled by 1/sqrt(key_length) whatever attention.scale says; no FFN
// scale is applied (build_ffn gets NULL for them). The converter writes
// LongRoPE's factors, chosen by the context as Phi-3's: rope_factors_short
// up to rope.scaling.original_context_length (else context_length),
// rope_factors_long beyond.
#include <cmath>
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/latent_attention.hpp"
#include "model/blocks/norm.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct MiniCpm3Layer {
  Norm attn_norm;
  LatentAttentionWeights attn;
  Norm ffn_norm;
  FfnWeights ffn;
};

struct MiniCpm3Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<MiniCpm3Layer> layers;

  // As llama.cpp's load_arch_tensors for minicpm3, plus its generic
  // per-tensor scales (attn_output's; the FFN's without effect).
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      MiniCpm3Layer& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::rms,
                            hp.rms_eps);
      layer.attn.visit(v, hp, il);
      layer.ffn_norm.visit(v, layer_tensor_name(il, "ffn_norm"), hp.n_embd, NormKind::rms,
                           hp.rms_eps);
      layer.ffn.visit(v, hp, il, {.scales_applied = false});
    }
    rope.visit_longrope(v, hp);
  }
};

class MiniCpm3Model final : public FamilyModel<MiniCpm3Weights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const MiniCpm3Layer& layer = w_.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, x, normed);
      latent_attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      add_scaled(ctx, x, branch);
      layer.ffn_norm.apply(ctx, x, normed);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      add_scaled(ctx, x, branch);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  // x += residual_scale * branch: llama.cpp's ggml_scale of the branch, then the add.
  void add_scaled(ForwardContext& ctx, Tensor x, Tensor branch) const {
    ctx.backend.scale(branch.first(x.size()), hparams_.residual_scale);
    ctx.backend.add(x, branch.first(x.size()));
  }
};

void read_minicpm3(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: all three required.
  for (const char* key :
       {"attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank"}) {
    if (!keys.has(key)) keys.invalid("missing key " + keys.key(key));
  }
  hp.q_lora_rank = keys.uint_or("attention.q_lora_rank", 0);
  hp.kv_lora_rank = keys.uint_or("attention.kv_lora_rank", 0);
  if (hp.q_lora_rank <= 0 || hp.kv_lora_rank <= 0) {
    keys.invalid("attention.q_lora_rank and kv_lora_rank must be positive");
  }
  // Every head's key is built from the latent: as many KV heads as heads.
  for (const LayerSpec& layer : hp.layers) {
    if (layer.n_head != hp.n_head || layer.n_head_kv != layer.n_head) {
      keys.invalid("minicpm3 needs one KV head per head, the same in every layer");
    }
  }
  // The graph's constants (MiniCPM3-4B's).
  hp.embedding_scale = 12.0f;
  hp.residual_scale = 1.4f / std::sqrt(static_cast<float>(hp.n_layer));
  hp.logit_scale = 256.0f / static_cast<float>(hp.n_embd);
  hp.attention_scale = 0.0f;
}

// MiniCPM3-4B's shape in small: ranks of 3/4 and 1/4 of n_embd, a head of
// n_embd / n_head values split 2:1 into nope and rope key parts plus the
// same again for the value.
void write_minicpm3(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const int64_t head = g.resolved_head_dim(), rope = head / 2;
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == "minicpm3.attention.head_count_kv") {
      kv.value = u32_value(g.n_head);
    }
    if (kv.key == "minicpm3.rope.dimension_count") {
      kv.value = u32_value(rope);
    }
  }
  keys.push_back({"minicpm3.attention.q_lora_rank", u32_value(g.n_embd * 3 / 4)});
  keys.push_back({"minicpm3.attention.kv_lora_rank", u32_value(g.n_embd / 4)});
  keys.push_back({"minicpm3.attention.key_length", u32_value(head + rope)});
}

constexpr std::string_view kMiniCpm3Optional[] = {"rope_factors_long.weight",
                                                  "rope_factors_short.weight"};

}  // namespace

const Family kMiniCpm3Family{.arch = "minicpm3",
                             .neox_rope = true,
                             .make = make_model<MiniCpm3Model>,
                             .read_hparams = read_minicpm3,
                             .tensors = tensors_of<MiniCpm3Weights>,
                             .write_hparams = write_minicpm3,
                             .converted_optional = kMiniCpm3Optional};

}  // namespace cortiq
