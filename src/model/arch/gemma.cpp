// Google's Gemma family: Gemma (`gemma`), Gemma 2 (`gemma2`) and the text
// model of Gemma 3 (`gemma3`). RMS norms whose weights the converter stores
// as 1 + w, GeGLU feed-forward, NeoX RoPE, the embedding scaled by
// sqrt(n_embd), the queries (not the scores) scaled, the output tied to the
// embedding. Gemma 2 and 3 add "sandwich" norms after each branch and
// alternate sliding-window and global layers:
//
//   x = token_embd[token] * sqrt(n_embd)
//   for each layer:
//     h = attention(rms_norm(x) * attn_norm)      q *= scale after RoPE;
//                                                 gemma2: logit softcap;
//                                                 gemma3: q/k RMS norms
//     x += rms_norm(h) * attn_post_norm           (gemma: x += h)
//     h = down(gelu_tanh(gate(y)) * up(y)),  y = rms_norm(x) * ffn_norm
//     x += rms_norm(h) * ffn_post_norm            (gemma: x += h)
//   logits = token_embd(rms_norm(x) * output_norm)
//   gemma2 (and gemma3 when set): logits = cap * tanh(logits / cap)
//
// Windows: gemma2 every other layer (4096 positions), gemma3 five local
// layers per global one (their RoPE base rope.freq_base_swa, 10000).
#include <cmath>
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

enum class Gemma { v1, v2, v3 };

Gemma version_of(std::string_view arch) {
  return arch == "gemma" ? Gemma::v1 : arch == "gemma2" ? Gemma::v2 : Gemma::v3;
}

struct GemmaLayer {
  std::vector<float> attn_norm, attn_post_norm;
  AttentionWeights attn;
  std::vector<float> ffn_norm, ffn_post_norm;
  FfnWeights ffn;
};

struct GemmaWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<GemmaLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const Gemma version = version_of(hp.arch);
    embedding.visit(v, hp);
    head.visit(v, hp, embedding,
               version == Gemma::v3 ? OutputMatrix::own_or_tied : OutputMatrix::always_tied);
    const auto norm = [&](std::vector<float>& w, int64_t il, const char* name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      GemmaLayer& layer = layers.emplace_back();
      norm(layer.attn_norm, il, "attn_norm.weight");
      layer.attn.visit(v, hp, il,
                       {.qk_norm = version == Gemma::v3 ? QkNorm::required : QkNorm::none});
      if (version != Gemma::v1) norm(layer.attn_post_norm, il, "post_attention_norm.weight");
      norm(layer.ffn_norm, il, "ffn_norm.weight");
      layer.ffn.visit(v, hp, il, {.biases = false, .scales_applied = false});
      if (version != Gemma::v1) norm(layer.ffn_post_norm, il, "post_ffw_norm.weight");
    }
  }
};

class GemmaModel final : public FamilyModel<GemmaWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const GemmaLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer.attn, h, il, pass, cache, ctx, normed, branch);
      add_post_normed(ctx, x, branch, layer.attn_post_norm);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      ffn(layer.ffn, FfnActivation::geglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      add_post_normed(ctx, x, branch, layer.ffn_post_norm);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  // x += rms_norm(branch) * post_norm, or x += branch without a post norm.
  void add_post_normed(ForwardContext& ctx, Tensor x, Tensor branch,
                       std::span<const float> post_norm) const {
    if (!post_norm.empty()) rms_norm(ctx, hparams_, branch, post_norm, branch);
    ctx.backend.add(x, branch);
  }
};

void read_common(ModelHParams& hp) {
  hp.embedding_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.scale_queries = true;
}

void read_gemma(const HParamReader&, ModelHParams& hp) {
  read_common(hp);
  hp.attention_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
}

// Gemma 2 27B (46 layers) scales by the model width per head, not the head
// size (gemma_pytorch's query_pre_attn_scalar), as llama.cpp does.
float gemma2_attention_scale(const ModelHParams& hp) {
  return hp.n_layer == 46 ? 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head))
                          : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
}

void read_gemma2(const HParamReader& keys, ModelHParams& hp) {
  read_common(hp);
  hp.attention_scale = gemma2_attention_scale(hp);
  hp.attn_softcap = keys.float_or("attn_logit_softcapping", 50.0f);
  hp.final_softcap = keys.float_or("final_logit_softcapping", 30.0f);
  hp.sliding_window = keys.uint_or("attention.sliding_window", 4096);
  hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", hp.rope.freq_base);
  set_sliding_window_pattern(hp, hp.sliding_window,
                             keys.uint_or("attention.sliding_window_pattern", 2), RopeSlot::local);
}

void read_gemma3(const HParamReader& keys, ModelHParams& hp) {
  read_common(hp);
  hp.attention_scale = gemma2_attention_scale(hp);  // 27B: 62 layers in gemma3, never 46
  hp.final_softcap = keys.float_or("final_logit_softcapping", 0.0f);
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  if (hp.sliding_window > 0) {
    // Local layers: their own base, no position scaling (llama.cpp's
    // rope_freq_scale_train_swa).
    hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", 10000.0f);
    hp.rope_local.freq_scale = 1.0f;
    set_sliding_window_pattern(hp, hp.sliding_window,
                               keys.uint_or("attention.sliding_window_pattern", 6),
                               RopeSlot::local);
  }
}

void write_gemma2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "gemma2.";
  keys.push_back({p + "attn_logit_softcapping", gguf::Value(50.0f)});
  keys.push_back({p + "final_logit_softcapping", gguf::Value(30.0f)});
  // A window shorter than the golden sequences, so they cross its edge.
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
}

void write_gemma3(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "gemma3.";
  write_head_size(g, kGemma3Family, keys, /*always=*/true);
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  keys.push_back({p + "rope.freq_base_swa", gguf::Value(10000.0f)});
  // Small models: a 2-layer pattern, so two layers hold one local, one global.
  keys.push_back({p + "attention.sliding_window_pattern", gguf::Value(uint32_t{2})});
}

}  // namespace

const Family kGemmaFamily{.arch = "gemma",
                          .neox_rope = true,
                          .make = make_model<GemmaModel>,
                          .read_hparams = read_gemma,
                          .tensors = tensors_of<GemmaWeights>};
const Family kGemma2Family{.arch = "gemma2",
                           .neox_rope = true,
                           .make = make_model<GemmaModel>,
                           .read_hparams = read_gemma2,
                           .tensors = tensors_of<GemmaWeights>,
                           .write_hparams = write_gemma2};
const Family kGemma3Family{.arch = "gemma3",
                           .neox_rope = true,
                           .make = make_model<GemmaModel>,
                           .read_hparams = read_gemma3,
                           .tensors = tensors_of<GemmaWeights>,
                           .write_hparams = write_gemma3};

}  // namespace cortiq
